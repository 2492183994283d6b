"""Vectorised planning gives exactly what the per-size path gave.

The references below are the code paths before the option tables were vectorised, kept as they
were: one ``options_at`` call per distinct size, the item-major hull, the greedy solver with its
lexsort and full upgrade rounds, the stream's ``choose_many`` and the batch account's per-size
``served_options``. Every plan, stream choice and served table is compared with them bit for bit
on real indexes (built by :func:`polydom.build`, both backends), at random sizes, with repeated
sizes (ties between items), caps and accuracy overrides.
"""

import math

import numpy as np
import pytest

import polydom
from polydom.serving import batchaccount
from polydom.index.serving import optiontable, planning
from polydom.index.serving.optiontable import OptionTable, option_source, option_table, options_many, options_per_size
from polydom.index.serving.planning import plan_batch
from polydom.index.queries import Batch

BACKENDS = [{}, {"tolerance": 0.01}, {"backend": "greedy", "n0": 30.0}, {"backend": "greedy-cost", "n0": 80.0}]
IDS = ["polydom", "polydom-ties", "greedy", "greedy-cost"]


def _index(seed: int, n_features: int = 7, **build_options):
    """A random instance; seed 0: one whose options lie on a line at every size, so that the hull
    drops the points on its chords (the chord test's equality case)."""
    if seed == 0:
        costs = {"a": [1.0], "b": [2.0], "c": [3.0]}  # exact in binary, as the accuracies are
        acc = {"a": 0.625, "b": 0.75, "c": 0.875}
        return polydom.build(costs, lambda s: max([acc[f] for f in s], default=0.5), **build_options)
    inst = polydom.make_synthetic(n_features, k=None, seed=seed)
    return polydom.build(inst.costs, inst.expand, **build_options)


def _sizes(rng, n: int, repeated: bool) -> np.ndarray:
    if repeated:  # a few distinct sizes, so many items tie
        return rng.choice(np.array([1.0, 7.5, 30.0, 64.0, 100.0]), n)
    return rng.uniform(1.0, 100.0, n)


# --------------------------------------------------------------------------- the old paths


def _old_table(index, sizes, max_item_budget=None, accuracy=None) -> OptionTable:
    """option_table before: per-size gathering, then every row sorted."""
    plain = option_table(index, sizes, max_item_budget=max_item_budget, accuracy=accuracy, per_size=True)
    # Re-pack from options_at's own rows with the old packing (every row lexsorted).
    sizes = np.asarray(sizes, dtype=float)
    unique, inverse = np.unique(sizes, return_inverse=True)
    masks, costs, acc, counts = (a[inverse] for a in options_per_size(index, unique))
    if accuracy is not None:
        acc = optiontable._overrides(accuracy, masks, counts)
    keep = np.arange(masks.shape[1]) < counts[:, None]
    if max_item_budget is not None:
        keep &= costs <= max_item_budget
    costs = np.where(keep, costs, np.inf)
    acc = np.where(keep, acc, np.nan)
    masks = np.where(keep, masks, -1)
    order = np.lexsort((-np.nan_to_num(acc, nan=-np.inf), costs), axis=-1)
    pick = np.take_along_axis
    old = OptionTable(sizes, pick(masks, order, 1), pick(costs, order, 1), pick(acc, order, 1),
                      keep.sum(axis=1).astype(np.intp))
    _assert_tables_equal(plain, old)  # the per-size switch of today's code packs as the old code did
    return old


def _old_hull(table):
    costs, acc = table.costs, table.accuracy
    n, width = costs.shape
    rows = np.arange(n)
    stack = np.zeros((n, width), dtype=np.intp)
    top = np.ones(n, dtype=np.intp)
    with np.errstate(invalid="ignore"):
        for j in range(1, width):
            cj, aj = costs[:, j], acc[:, j]
            live = (j < table.counts) & (aj > acc[rows, stack[rows, top - 1]])
            while True:
                can = np.flatnonzero(live & (top >= 2))
                if not len(can):
                    break
                p1, p0 = stack[can, top[can] - 1], stack[can, top[can] - 2]
                c0, a0, c1, a1 = costs[can, p0], acc[can, p0], costs[can, p1], acc[can, p1]
                under = (a1 - a0) * (cj[can] - c1) <= (aj[can] - a1) * (c1 - c0)
                if not under.any():
                    break
                top[can[under]] -= 1
            stack[rows[live], top[live]] = j
            top[live] += 1
    return stack, top


def _old_steps(table, positions, lengths):
    rows = np.arange(len(table))[:, None]
    hc, ha = table.costs[rows, positions], table.accuracy[rows, positions]
    valid = np.arange(positions.shape[1] - 1) < (lengths - 1)[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        dc = np.where(valid, np.diff(hc, axis=1), np.nan)
        da = np.where(valid, np.diff(ha, axis=1), np.nan)
        slope = da / dc
    return valid, dc, da, slope


def _old_upgrade(table, position, left):
    rows = np.arange(len(table))
    valid = table.valid
    for _ in range(planning._UPGRADE_ROUNDS):
        cost, acc = table.costs[rows, position], table.accuracy[rows, position]
        fits = valid & (table.costs - cost[:, None] <= left)
        gain = np.where(fits, table.accuracy - acc[:, None], -np.inf)
        best = np.argmax(gain, axis=1)
        i = int(np.argmax(gain[rows, best]))
        if not gain[i, best[i]] > 0:
            break
        left -= table.costs[i, best[i]] - cost[i]
        position = position.copy()
        position[i] = best[i]
    return position


def _old_greedy(table, budget):
    n = len(table)
    rows = np.arange(n)
    positions, lengths = _old_hull(table)
    valid, dc, da, slope = _old_steps(table, positions, lengths)
    item, step = np.nonzero(valid)
    key = np.fmin.accumulate(np.where(valid, slope, np.inf), axis=1)[item, step]
    order = np.lexsort((step, item, -key))
    item, step, dcs, das = item[order], step[order], dc[item[order], step[order]], da[item[order], step[order]]
    base = math.fsum(table.costs[:, 0].tolist())
    total = base + np.cumsum(dcs)
    k = int(np.searchsorted(total, budget, side="right"))
    taken = np.bincount(item[:k], minlength=n)
    spent = total[k - 1] if k else base
    lp = math.fsum(table.accuracy[:, 0].tolist()) + math.fsum(das[:k].tolist())
    exact_lp = k == len(dcs)
    if not exact_lp:
        lp += (budget - spent) / dcs[k] * das[k]
    left = budget - spent
    for s in np.flatnonzero(dcs[k:] <= left) + k:
        i = item[s]
        if step[s] == taken[i] and dcs[s] <= left:
            taken[i] += 1
            left -= dcs[s]
    position = positions[rows, taken]
    position = _old_upgrade(table, position, left)
    value = math.fsum(table.accuracy[rows, position].tolist())
    return position, lp, exact_lp or value >= lp - 1e-9 * max(1.0, abs(lp))


def _old_plan(table, budget):
    """plan_batch before, on a table from :func:`_old_table`."""
    n = len(table)
    position, bound, optimal = _old_greedy(table, budget)
    position, repaired = planning._fit_budget(table, position, budget)
    rows = np.arange(n)
    cost, acc = table.costs[rows, position], table.accuracy[rows, position]
    return (table.masks[rows, position], cost, acc, math.fsum(cost.tolist()),
            max(bound / n if n else 0.0, float(acc.mean()) if n else 0.0), optimal and not repaired)


def _assert_tables_equal(a: OptionTable, b: OptionTable):
    for x, y in ((a.sizes, b.sizes), (a.masks, b.masks), (a.costs, b.costs), (a.accuracy, b.accuracy),
                 (a.counts, b.counts)):
        assert x.shape == y.shape and x.dtype == y.dtype
        assert np.array_equal(x, y, equal_nan=True)


# --------------------------------------------------------------------------- gathering


@pytest.mark.parametrize("build_options", BACKENDS, ids=IDS)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_options_many_is_options_at_for_every_size(build_options, seed):
    index = _index(seed, **build_options)
    rng = np.random.default_rng(seed)
    sizes = np.concatenate([rng.uniform(0.0, 120.0, 500), [0.0, 1.0, 100.0]])
    if hasattr(index, "bounds"):  # the ends of every range, and just inside them
        bounds = np.asarray(index.bounds)
        sizes = np.concatenate([sizes, bounds, np.nextafter(bounds, 0.0), np.nextafter(bounds, np.inf)])
    sizes = np.unique(sizes[(sizes >= index.domain[0]) & (sizes <= index.domain[1])])
    many, per_size = options_many(index, sizes), options_per_size(index, sizes)
    for x, y in zip(many, per_size):
        assert x.shape == y.shape and x.dtype == y.dtype
        assert np.array_equal(x, y, equal_nan=True)
    source = option_source(index)
    for s in sizes[::7].tolist():
        assert source.one(s) == tuple(index.options_at(s))
    assert [a.shape for a in options_many(index, np.zeros(0))] == [(0, 1), (0, 1), (0, 1), (0,)]


@pytest.mark.parametrize("build_options", [BACKENDS[0], BACKENDS[2]], ids=["polydom", "greedy"])
def test_option_tables_follow_a_refresh(tmp_path, build_options):
    """A refreshed index replaces the state its option tables were built from: they are rebuilt."""
    path = str(tmp_path / "index")
    _index(1, **build_options).save(path)
    live = polydom.load(path)
    before = options_many(live, np.array([10.0, 50.0]))
    stream = polydom.StreamBudget(live, 5.0, sizes=[10.0, 50.0])
    stream.choose(10.0)
    _index(2, **build_options).save(path)
    assert live.refresh()
    stream.choose(50.0)
    assert stream._source is option_source(live) and stream._source.current(live)
    after = options_many(live, np.array([10.0, 50.0]))
    assert not all(np.array_equal(x, y, equal_nan=True) for x, y in zip(before, after))
    for x, y in zip(after, options_per_size(live, [10.0, 50.0])):
        assert np.array_equal(x, y, equal_nan=True)


def test_an_index_without_option_tables_is_gathered_size_by_size(costly_backend):
    table = option_table(costly_backend, [1.0, 2.0, 1.0])
    assert option_source(costly_backend) is None
    _assert_tables_equal(table, option_table(costly_backend, [1.0, 2.0, 1.0], per_size=True))


# --------------------------------------------------------------------------- plans


@pytest.mark.parametrize("build_options", BACKENDS, ids=IDS)
@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_plans_are_the_per_size_paths_plans(build_options, seed):
    index = _index(seed, **build_options)
    rng = np.random.default_rng(seed)
    for repeated in (False, True):
        sizes = _sizes(rng, 400, repeated)
        table = option_table(index, sizes)
        most = math.fsum(table.costs[np.arange(len(table)), table.counts - 1].tolist())
        cap = float(np.median(table.costs[:, min(3, table.costs.shape[1] - 1)]))
        for max_item_budget in (None, cap):
            old_table = _old_table(index, sizes, max_item_budget)
            _assert_tables_equal(option_table(index, sizes, max_item_budget=max_item_budget), old_table)
            for fraction in (0.0, 0.03, 0.2, 0.6, 1.0, math.inf):
                budget = fraction * most if math.isfinite(fraction) else math.inf
                try:
                    plan = plan_batch(index, sizes, budget, max_item_budget=max_item_budget)
                except ValueError:
                    with pytest.raises(ValueError):
                        _old_plan(old_table, budget)
                    continue
                keys, cost, acc, total, bound, optimal = _old_plan(old_table, budget)
                assert np.array_equal(plan.choices.keys, keys)
                assert np.array_equal(plan.choices.cost, cost) and np.array_equal(plan.choices.accuracy, acc)
                assert (plan.total_cost, plan.accuracy_bound, plan.optimal) == (total, bound, optimal)
                assert plan.solver == "greedy"
                plan.check_invariants()


@pytest.mark.parametrize("build_options", BACKENDS[:3], ids=IDS[:3])
def test_plans_with_accuracy_overrides_are_the_per_size_paths_plans(build_options):
    index = _index(5, **build_options)
    rng = np.random.default_rng(5)
    sizes = _sizes(rng, 300, False)
    counts = option_table(index, sizes).counts
    rows = [np.clip(rng.normal(0.8, 0.1, k), 0, 1) for k in counts]
    table, old_table = option_table(index, sizes, accuracy=rows), _old_table(index, sizes, accuracy=rows)
    _assert_tables_equal(table, old_table)
    budget = 0.1 * math.fsum(table.costs[np.arange(len(table)), table.counts - 1].tolist())
    plan = plan_batch(index, sizes, budget, accuracy=rows)
    keys, cost, acc, total, bound, optimal = _old_plan(old_table, budget)
    assert np.array_equal(plan.choices.keys, keys) and np.array_equal(plan.choices.accuracy, acc)
    assert (plan.total_cost, plan.accuracy_bound, plan.optimal) == (total, bound, optimal)


def test_the_upgrade_shortcut_is_the_full_rounds():
    """From hull points the upgrade rounds look only where the next option fits; from any other
    positions they look everywhere. Both are the old full rounds."""
    index = _index(6)
    rng = np.random.default_rng(6)
    table = option_table(index, _sizes(rng, 500, False))
    positions, lengths = planning.upper_hull(table)
    for _ in range(20):
        taken = rng.integers(0, lengths)
        hull = positions[np.arange(len(table)), taken]
        anywhere = rng.integers(0, table.counts)
        left = float(rng.choice([0.0, rng.uniform(0, 50), math.inf]))
        assert np.array_equal(planning._upgrade(table, hull, left, hull=True), _old_upgrade(table, hull, left))
        assert np.array_equal(planning._upgrade(table, anywhere, left), _old_upgrade(table, anywhere, left))


# --------------------------------------------------------------------------- the stream


def _old_choose_many(stream, sizes):
    """StreamBudget.choose_many before: per-size options, the old hull, numpy items one by one."""
    table = _old_table(stream.index, sizes, stream.max_item_budget)
    positions, lengths = _old_hull(table)
    _, _, _, slope = _old_steps(table, positions, lengths)
    rows = np.arange(len(table))[:, None]
    hull_cost, hull_acc, hull_mask = (table.costs[rows, positions], table.accuracy[rows, positions],
                                      table.masks[rows, positions])
    cheap, dear = polydom.serving.stream._positions(slope, stream.price_)
    rows = np.arange(len(table))
    cost, acc, key = hull_cost[rows, cheap], hull_acc[rows, cheap], hull_mask[rows, cheap]
    extra = np.where(dear > cheap, hull_cost[rows, dear] - cost, 0.0)
    for i in range(len(table)):
        k = int(table.counts[i])
        cost[i], acc[i], key[i] = stream._book(
            cost[i], acc[i], key[i], extra[i], (hull_cost[i, dear[i]], hull_acc[i, dear[i]], hull_mask[i, dear[i]]),
            (table.costs[i, :k].tolist(), table.accuracy[i, :k].tolist(), table.masks[i, :k].tolist(),
             table.sizes[i]), 0)
    return Batch.of(stream.index, key, acc, cost)


def _served(stream, sizes, how):
    out = []
    try:
        if how == "choose":
            out = [tuple(stream.choose(s)) for s in sizes.tolist()]
        elif how == "choose numpy":
            out = [tuple(stream.choose(s)) for s in sizes]
        elif how == "choose_many":
            for part in (sizes[:100], sizes[100:]):
                batch = stream.choose_many(part)
                out += [tuple(batch[i]) for i in range(len(batch))]
        else:
            for part in (sizes[:100], sizes[100:]):
                if stream.adapt is not None:
                    batches = [_old_choose_many(stream, [s]) for s in part]
                    out += [tuple(b[0]) for b in batches]
                else:
                    batch = _old_choose_many(stream, part)
                    out += [tuple(batch[i]) for i in range(len(batch))]
    except RuntimeError as error:
        out.append(str(error))
    return out, stream.spent, stream.served, stream.price_


@pytest.mark.parametrize("build_options", BACKENDS, ids=IDS)
@pytest.mark.parametrize("config", [{}, {"horizon": 150}, {"burst": "dearest"}, {"adapt": 0.05},
                                    {"tie_rule": "random", "seed": 3}, {"max_item_budget": "cap"},
                                    {"horizon": 40, "adapt": 0.01}])
@pytest.mark.parametrize("seed", [0, 3])
def test_stream_choices_are_the_per_size_paths_choices(build_options, config, seed):
    index = _index(seed, **build_options)
    rng = np.random.default_rng(7)
    sizes = _sizes(rng, 300, repeated=bool(config.get("tie_rule")))
    options = [index.options_at(s) for s in sizes[:50].tolist()]
    config = dict(config)
    if config.get("max_item_budget") == "cap":
        config["max_item_budget"] = 1.5 * max(o[1][0] for o in options)
    if config.get("burst") == "dearest":
        config["burst"] = max(max(o[1]) for o in options)
    mean_budget = float(np.median([np.median(o[1]) for o in options]))
    stream = polydom.StreamBudget(index, mean_budget, sizes=sizes[:100], **config)
    reference = _served(stream, sizes, "old")
    assert reference[2] > 0
    for how in ("choose", "choose numpy", "choose_many"):
        stream.reset()
        assert _served(stream, sizes, how) == reference, how


def test_stream_choose_refuses_and_warns_as_choose_many_does():
    index = _index(3)
    stream = polydom.StreamBudget(index, 5.0, sizes=[10.0, 50.0])
    for bad, error in ((-1.0, ValueError), (math.nan, ValueError), (math.inf, ValueError), ("7", TypeError)):
        with pytest.raises(error) as raised:
            stream.choose(bad)
        with pytest.raises(error) as again:
            stream.choose_many([bad])
        assert str(raised.value) == str(again.value)
    assert stream.served == 0


def test_stream_choose_serves_other_indexes_through_choose_many(costly_backend):
    stream = polydom.StreamBudget(costly_backend, 10.0, sizes=[1.0], max_item_budget=2.5)
    assert option_source(costly_backend) is None
    first = stream.choose(1.0)
    stream.reset()
    assert first == stream.choose_many([1.0])[0]
    with pytest.raises(ValueError, match="no option of item 0"):
        stream.choose(2.0)


# --------------------------------------------------------------------------- the batch account


def _old_served_options(index, sizes, max_item_budget=None):
    options = _old_table(index, sizes, max_item_budget)
    unique, first, inverse = np.unique(options.sizes, return_index=True, return_inverse=True)
    width = options.costs.shape[1]
    valid = options.valid[first]
    row, column = np.nonzero(valid)
    asked = options.costs[first][row, column]
    served = index.lookup_many(unique[row], asked)
    keys, cost, acc = served.keys.tolist(), served.cost.tolist(), served.accuracy.tolist()
    masks = np.full((len(unique), width), -1, dtype=np.int64)
    costs = np.full((len(unique), width), np.inf)
    accuracy = np.full((len(unique), width), np.nan)
    budgets = np.full((len(unique), width), np.inf)
    counts = np.zeros(len(unique), dtype=np.intp)
    starts = np.searchsorted(row, np.arange(len(unique) + 1))
    for u in range(len(unique)):
        entries = {}
        for k in range(starts[u], starts[u + 1]):
            entries.setdefault(keys[k], (cost[k], acc[k], max(float(asked[k]), cost[k])))  # budget >= cost
        ordered = sorted(entries.items(), key=lambda e: (e[1][0], -e[1][1], e[1][2]))
        counts[u] = len(ordered)
        for j, (key, (c, a, b)) in enumerate(ordered):
            masks[u, j], costs[u, j], accuracy[u, j], budgets[u, j] = key, c, a, b
    table = OptionTable(options.sizes, masks[inverse], costs[inverse], accuracy[inverse], counts[inverse])
    return table, budgets[inverse]


@pytest.mark.parametrize("build_options", BACKENDS, ids=IDS)
def test_served_options_are_the_per_size_paths(build_options):
    index = _index(4, **build_options)
    rng = np.random.default_rng(4)
    for repeated in (False, True):
        sizes = _sizes(rng, 300, repeated)
        cap = 2.0 * float(np.median([index.options_at(s)[1][1] for s in sizes[:20].tolist()]))
        for max_item_budget in (None, cap):
            try:
                table, budgets = batchaccount.served_options(index, sizes, max_item_budget=max_item_budget)
            except ValueError:
                continue
            old_table, old_budgets = _old_served_options(index, sizes, max_item_budget)
            _assert_tables_equal(table, old_table)
            assert np.array_equal(budgets, old_budgets)
            table.check_invariants()
