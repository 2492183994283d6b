"""What features cost on this machine: timed, fitted and calibrated.

* :mod:`.measure` -- timing each feature across sizes and fitting its cost curve;
* :mod:`.calibration` -- from the timing thread's CPU time to the wall time serving meets, and
  each feature's cost law;
* :mod:`.decode` -- what decoding an encoded image costs, and when serving decodes.
"""
