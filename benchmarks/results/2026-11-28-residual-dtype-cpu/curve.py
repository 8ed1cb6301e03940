"""The learning guard's curve (tests/train/test_learning.py) with extra settings, for the checkout
at ROOT: python curve.py ROOT OUT [key=value ...]"""
import json, sys
from pathlib import Path
def main():
    root, out, *extra = sys.argv[1:]
    sys.path.insert(0, root)
    L = __import__("tests.train.test_learning", fromlist=["x"])
    assert str(L.ROOT) == str(Path(root).resolve()), (L.ROOT, root)
    L.SETTINGS = L.SETTINGS + extra
    out = Path(out); out.mkdir(parents=True, exist_ok=True)
    cache = L.prepare_cache(out / "c")
    curve = L.learning_curve(cache, out / "run")
    fixed = L.fixed_batch_losses(cache, "duration")
    print(json.dumps({"root": root, "extra": extra, "curve": curve, "fixed_duration": fixed}))


if __name__ == '__main__':
    main()
