"""compare.py OUT EVALS_JSON: the two arms' end-to-end figures from their `myxtts eval` files, and
a paired bootstrap over (model, sentence) of the difference in pooled WER.

EVALS_JSON maps an arm ("griffin-lim", "before", "cool-down", and any "fitted ..." arm) to
{vocoder: {model seed: path of eval.json}}. Writes OUT (JSON) and prints the tables."""
import json
import random
import sys

from myxtts.evaluate.metrics import word_errors

out, spec = sys.argv[1], json.load(open(sys.argv[2]))


def errors(path):
    """{sentence id: (word errors, words)} and the eval's summary figures."""
    e = json.load(open(path))
    per = {}
    for s in e["per_sentence"]:
        w = word_errors(s["text"], s["transcript"])
        per[s["id"]] = (w.edits, w.length)
    return per, {k: e[k] for k in ("wer", "dnsmos_ovrl", "wer_copy_synthesis", "dnsmos_ovrl_copy_synthesis", "step", "vocoder")}


data = {arm: {v: {m: errors(p) for m, p in runs.items()} for v, runs in vocs.items()} for arm, vocs in spec.items()}
gl = {m: fig for m, (_, fig) in data["griffin-lim"]["griffin-lim"].items()}
result = {"pairs": {}, "arms": {}}
for arm, vocs in data.items():
    for v, runs in vocs.items():
        for m, (per, fig) in runs.items():
            met = (arm != "griffin-lim" and fig["wer"] <= gl[m]["wer"] + 1e-9
                   and fig["dnsmos_ovrl"] >= gl[m]["dnsmos_ovrl"] + 0.3)
            result["pairs"][f"{arm}/{v}/model-{m}"] = {**fig, "target_met": met}
    units = {}  # (model, sentence) → [errors, words] summed over the arm's vocoders
    for v, runs in vocs.items():
        for m, (per, _) in runs.items():
            for sid, (e, w) in per.items():
                u = units.setdefault((m, sid), [0, 0])
                u[0] += e
                u[1] += w
    result["arms"][arm] = units
keys = sorted(result["arms"]["griffin-lim"])


def pooled(arm, ks):
    units = result["arms"][arm]
    return sum(units[k][0] for k in ks) / sum(units[k][1] for k in ks)


rng = random.Random(0)
summary = {}
complete = [arm for arm, units in result["arms"].items() if all(k in units for k in keys)]
for arm in complete:  # an arm of fewer models than Griffin-Lim's has its pairs only
    summary[arm] = {"pooled_wer": pooled(arm, keys)}
pairs = [("cool-down", "before"), ("cool-down", "griffin-lim"), ("before", "griffin-lim")]
pairs += [(arm, "cool-down") for arm in complete if arm.startswith("fitted")]
for a, b in pairs:
    diffs = []
    for _ in range(10000):
        ks = [rng.choice(keys) for _ in keys]
        diffs.append(pooled(a, ks) - pooled(b, ks))
    diffs.sort()
    summary[f"{a} - {b}"] = {"pooled_wer_diff": pooled(a, keys) - pooled(b, keys),
                             "ci95": [diffs[250], diffs[9749]],
                             "share_below_0": sum(d < 0 for d in diffs) / len(diffs)}
result["arms"] = summary
json.dump(result, open(out, "w"), indent=1)
for k, fig in result["pairs"].items():
    print(f"{k:<40} WER {100 * fig['wer']:5.1f}  DNSMOS {fig['dnsmos_ovrl']:.2f}  copy WER {100 * fig['wer_copy_synthesis']:5.1f}  {'met' if fig['target_met'] else ''}")
print(json.dumps(summary, indent=1))
