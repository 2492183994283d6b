"""Serving a built index on a real clock: the anytime walk and what it reads.

* :mod:`.anytime` -- the walk over a set's prefix chain, and its rules;
* :mod:`.stake` -- whether a start raises the expected on-time accuracy;
* :mod:`.prefixes` -- the ranked chain prefixes and the best computed one;
* :mod:`.walkprep` -- what a walk reads of an index, prepared once per version;
* :mod:`.walktrace` -- traced walks, replayed where they provably hold;
* :mod:`.guards` -- cost guards learned from the serving clock;
* :mod:`.lateness` -- the price of lateness that holds a late-share budget;
* :mod:`.planning`, :mod:`.optiontable` -- one set per item under a total budget.
"""
