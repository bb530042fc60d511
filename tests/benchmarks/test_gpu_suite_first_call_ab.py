"""The first call's host-path A/B: fbfc380's PrefetchedDispatch (the study's A side) and today's pick the same
variant on every recorded test input of the four benchmarks, before the features land and once they have."""

import json
import types

from benchmarks.gpu_suite import first_call_ab
from benchmarks.gpu_suite.prefetched import RAW
from benchmarks.gpu_suite.run import BENCHES, LIBRARY_DEFAULT


def test_both_sides_pick_alike_on_every_recorded_test_input():
    raw = json.loads(RAW.read_text())["benchmarks"]
    rules = next(iter(json.loads(first_call_ab.RULES.read_text())["runs"].values()))["benchmarks"]
    rt = types.SimpleNamespace(cuda=True, default=lambda k: LIBRARY_DEFAULT[k])
    for name in ("spmv", "histogram", "sort", "bfs"):
        variants = BENCHES[name](rt).variants()
        sels = first_call_ab.selectors(name, rules[name]["selector"], variants, LIBRARY_DEFAULT[name],
                                       raw[name]["feature_names"])
        picks = first_call_ab.same_picks(name, raw[name], sels)
        assert picks == {"agree": 2 * len(raw[name]["test"]), "disagree": 0}
