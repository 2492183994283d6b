"""The classifier's own modules: what ``CostSensitiveClassifier`` fits, serves and saves with.

Internal; users import :class:`polydom.CostSensitiveClassifier` and the settings groups from
:mod:`polydom`. Nothing is imported here, so serving a plain index never loads these modules.

* ``estimator`` -- the scikit-learn classifier: ``fit``, ``predict``, ``server``, ``save``.
* ``policies`` -- the settings groups ``Selection``, ``Timing``, ``Cascade``, ``Serving``.
* ``classifier_params`` -- the constructor's constraint table.
* ``constraints`` -- scikit-learn-style parameter constraints.
* ``pipeline`` -- the fit: extract, time, learn, build; progress of a fit.
* ``progress`` -- plain progress lines at an interval that grows with the fit.
* ``extraction`` -- every feature of every image, timed, cached on disk.
* ``costs`` -- cost curves from the extraction's own calls and the sizes it lacks.
* ``calibration`` -- curves raised to what serving measures; the start guards.
* ``blackbox`` -- the cross-validated black box over the feature matrix, with screening.
* ``learners`` -- the default learners, folds and standard errors.
* ``warntally`` -- learner warnings counted per fit and reported once.
* ``cascades`` -- confidence cascades, learned out of fold.
* ``precomputed`` -- fitting from feature matrices computed elsewhere.
* ``inputs`` -- images, labels, groups and budgets, each checked once.
* ``serving`` -- the planner that serves images, and the ``Server`` that learns its guards.
* ``servingstate`` -- the one immutable state a request serves from.
* ``lean`` -- linear models served through numpy.
* ``batchserving``, ``batchaccount`` -- a total budget for a batch of images.
* ``classifier_state`` -- the classifier's state saved inside its index.
"""
