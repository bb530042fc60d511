"""Choose a variant per input: two sorts, two features, a model trained on 12 inputs, dispatch per call."""

import numpy as np

import adaptune as at

sort = at.CodeVariant("sort")


@sort.variant(default=True)
def quick(keys):
    return np.sort(keys, kind="quicksort")


@sort.variant
def stable(keys):
    return np.sort(keys, kind="stable")


sort.feature(lambda keys: np.log10(keys.size), name="log_n")
sort.feature(lambda keys: float(np.mean(keys[1:] >= keys[:-1])), name="sortedness")

rng = np.random.default_rng(0)


def make_input(i):
    keys = rng.random(int(10 ** rng.uniform(3, 4.5)))
    return (np.sort(keys) if i % 2 else keys,)  # half of them already sorted


train, test = [make_input(i) for i in range(12)], [make_input(i) for i in range(6)]
report = sort.train(train, model="tree", repeats=3, progress=False)
print("model", report.model, "labels", report.labels)
print("chosen for the first test input:", sort.select(*test[0]))
assert np.array_equal(sort(*test[0]), np.sort(test[0][0]))  # dispatch: features -> model -> variant
sort.save("sort.json")  # plain JSON: loads without running code
print("fraction of oracle on unseen inputs:", round(at.evaluate(sort, test, repeats=3, progress=False).mean_fraction_of_oracle, 3))
