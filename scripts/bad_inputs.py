"""Run a table of bad inputs against the real CLI and count how each ends.

    PYTHONPATH=$PWD .venv/bin/python scripts/bad_inputs.py [--only SUBSTR] [--jobs 2]

Each case is a command line (run as ``python -m workbench.cli ...`` in a subprocess) and what a
good answer looks like: ``refuse`` (exit 2, one line on stderr naming ``expect``, no traceback) or
``handle`` (any exit code below 2 or 3, no traceback). Outcomes: refused cleanly, handled,
traceback, wrong (the exit code or the message is not what it should be). Fixtures (a tiny
checkpoint, a masked-LM checkpoint, a tiny export run, bad data files) are built once in a temporary
folder. Prints one line per case and the counts; ``--json`` writes them too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

PY = sys.executable


def cli(*args, cwd=None, timeout=300, env=None):
    e = {**os.environ, **(env or {})}
    return subprocess.run([PY, "-m", "workbench.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=e)


def fixtures(root: Path) -> dict:
    f = {}
    code = """
import sys
from transformers import BertConfig, BertForMaskedLM
from workbench.models.load import load_model, TINY_CONFIG
m = load_model('tiny')
m.model.save_pretrained(sys.argv[1] + '/tiny'); m.tokenizer.save_pretrained(sys.argv[1] + '/tiny')
cfg = BertConfig(vocab_size=m.tokenizer.vocab_size, **TINY_CONFIG)
BertForMaskedLM(cfg).save_pretrained(sys.argv[1] + '/mlm'); m.tokenizer.save_pretrained(sys.argv[1] + '/mlm')
"""
    subprocess.run([PY, "-c", code, str(root)], check=True, capture_output=True)
    f["tiny"] = root / "tiny"
    f["mlm"] = root / "mlm"
    trunc = root / "trunc"
    shutil.copytree(f["tiny"], trunc)
    w = trunc / "model.safetensors"
    w.write_bytes(w.read_bytes()[: w.stat().st_size // 2])
    f["trunc"] = trunc
    run = root / "run"
    r = cli("export", "--model", "tiny", "--preset", "quick", "--validation-examples", "4", "--run-dir", run)
    assert r.returncode == 0, r.stderr
    f["run"] = run
    (root / "garbage.onnx").write_bytes(b"this is not a graph" * 10)
    f["garbage"] = root / "garbage.onnx"
    g = (run / "export" / "model.onnx").read_bytes()
    (root / "half.onnx").write_bytes(g[: len(g) // 3])
    f["half"] = root / "half.onnx"
    rows = [f"{'great' if i % 2 else 'bad'} film number {i},{'pos' if i % 2 else 'neg'}" for i in range(40)]
    (root / "ok.csv").write_text("text,label\n" + "\n".join(rows) + "\n")
    (root / "cp1252.csv").write_bytes(("text,label\n" + "\n".join(rows) + "\ncaf\u00e9 cr\u00e8me \u201cgood\u201d,pos\n").encode("cp1252"))
    (root / "ids.csv").write_text("text,label\n" + "\n".join(r.replace(",pos", ",1").replace(",neg", ",0") for r in rows) + "\n")
    (root / "tinyclass.csv").write_text("text,label\n" + "\n".join(rows) + "\nodd one,rare\nanother odd,rare\n")
    (root / "unknown.csv").write_text("text,label\n" + "\n".join(r.replace(",pos", ",maybe") for r in rows) + "\n")
    (root / "bad.jsonl").write_text('{"text": "fine", "label": "pos"}\n{"text": "broken", "label": \n{"text": "x", "label": "neg"}\n')
    (root / "file").write_text("not a folder")
    ro = root / "readonly"
    ro.mkdir()
    # a read-only folder even for root: a read-only tmpfs where mounting is allowed, else permission bits
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(ro)], capture_output=True).returncode == 0
    if not mounted:
        ro.chmod(0o555)
    f["ro"] = ro
    f["ro_mounted"] = mounted
    if mounted:  # a graph in a read-only folder (with its export.json): quantize must not write beside it
        shutil.copytree(run, root / "ro-run")
        rog = root / "ro-run" / "export"
        subprocess.run(["mount", "--bind", "-o", "ro", str(rog), str(rog)], capture_output=True)
        if subprocess.run(["mount", "-o", "remount,bind,ro", str(rog)], capture_output=True).returncode == 0:
            f["ro_graph"] = rog / "model.onnx"

    corrupt = root / "corrupt-run"
    shutil.copytree(run, corrupt)
    (corrupt / "export" / "export.json").write_text('{"opset": 17, "onnx_pa')
    f["corrupt"] = corrupt
    return f


def cases(root: Path, f: dict) -> list[dict]:
    R, H = "refuse", "handle"
    q = ["--preset", "quick"]
    copies = iter(range(1000))

    def run():  # a fresh copy of the exported run for each case (cases run side by side)
        dst = root / f"run-{next(copies)}"
        shutil.copytree(f["run"], dst)
        return dst

    return [
        # train / compare / data
        dict(name="train --data missing", args=["train", "--data", root / "nope.csv", "--runs", root / "r1"], want=R, expect="nope.csv"),
        dict(name="train --data cp1252", args=["train", "--data", root / "cp1252.csv", "--steps", "1", "--runs", root / "r2"], want=R,
             expect="UTF-8"),
        dict(name="train --data bad jsonl", args=["train", "--data", root / "bad.jsonl", "--runs", root / "r3"], want=R, expect="line 2"),
        dict(name="compare --data missing", args=["compare", "--data", root / "nope.csv", "--runs", root / "r4"], want=R,
             expect="nope.csv"),
        dict(name="data class of 2 rows", args=["data", "--source", root / "tinyclass.csv"], want=R, expect="rare"),
        dict(name="train --nproc 0", args=["train", "--nproc", "0", "--runs", root / "r5"], want=R, expect="--nproc"),
        dict(name="train --nproc 64", danger=True, args=["train", "--nproc", "64", "--runs", root / "r6"], want=R, expect="--nproc"),
        dict(name="train --steps -1", args=["train", "--steps", "-1", "--runs", root / "r7"], want=R, expect="--steps"),
        dict(name="train --lr abc", args=["train", "--lr", "abc"], want=R, expect="abc"),
        dict(name="train --max-length 0", args=["train", "--max-length", "0", "--runs", root / "r8"], want=R, expect="--max-length"),
        dict(name="train --run-dir is a file", args=["train", "--steps", "1", "--run-dir", root / "file"], want=R, expect="file"),
        dict(name="train --model missing", args=["train", "--model", root / "nomodel", "--runs", root / "r9"], want=R, expect="nomodel"),
        # export
        dict(name="export --run-dir is a file", args=["export", "--model", "tiny", *q, "--run-dir", root / "file"], want=R, expect="file"),
        dict(name="export --run-dir read-only", args=["export", "--model", "tiny", *q, "--run-dir", f["ro"] / "x"], want=R,
             expect="readonly"),
        dict(name="export --runs /proc/x", args=["export", "--model", "tiny", *q, "--runs", "/proc/x"], want=R, expect="/proc/x"),
        dict(name="export truncated safetensors", args=["export", "--model", f["trunc"], *q, "--runs", root / "r10"], want=R,
             expect="safetensors"),
        dict(name="export masked-LM", args=["export", "--model", f["mlm"], *q, "--runs", root / "r11"], want=R,
             expect="classification head"),
        dict(name="export --max-length 100000", args=["export", "--model", "tiny", *q, "--max-length", "100000", "--runs", root / "r12"],
             want=R, expect="--max-length"),
        dict(name="export --data missing", args=["export", "--model", "tiny", *q, "--data", root / "nope.csv", "--runs", root / "r13"],
             want=R, expect="nope.csv"),
        dict(name="export into a run with a corrupt export.json", args=["export", "--model", "tiny", *q, "--run-dir",
                                                                        shutil.copytree(f["corrupt"], root / "corrupt-copy")], want=H),
        # fuse
        dict(name="fuse garbage .onnx", args=["fuse", f["garbage"], "--preset", "inspect"], want=R, expect="garbage.onnx"),
        dict(name="fuse truncated .onnx", args=["fuse", f["half"], "--preset", "inspect"], want=R, expect="half.onnx"),
        dict(name="fuse missing path", args=["fuse", root / "missing" / "deep" / "m.onnx"], want=R, expect="missing",
             no_path=root / "missing"),
        dict(name="fuse --run-dir is a file", args=["fuse", run(), "--preset", "inspect", "--run-dir", root / "file"], want=R,
             expect="file"),
        dict(name="fuse --run-dir read-only", args=["fuse", run(), "--preset", "inspect", "--run-dir", f["ro"] / "x"], want=R,
             expect="readonly"),
        dict(name="fuse corrupt export.json", args=["fuse", f["corrupt"], "--preset", "inspect"], want=R, expect="export.json"),
        dict(name="fuse --shapes 0x0", args=["fuse", run(), "--shapes", "0x0"], want=R, expect="0x0"),
        # quantize
        dict(name="quantize garbage .onnx", args=["quantize", f["garbage"], "--quick"], want=R, expect="garbage.onnx"),
        dict(name="quantize unknown labels", args=["quantize", run(), "--quick", "--data", root / "unknown.csv", "--node-samples", "0"],
             want=R, expect="maybe"),
        dict(name="quantize --run-dir is a file", args=["quantize", run(), "--quick", "--run-dir", root / "file"], want=R, expect="file"),
        dict(name="quantize corrupt export.json", args=["quantize", f["corrupt"], "--quick"], want=R, expect="export.json"),
        dict(name="quantize --n-boot 0", args=["quantize", run(), "--quick", "--n-boot", "0"], want=R, expect="--n-boot"),
        dict(name="quantize --node-samples -1", args=["quantize", run(), "--quick", "--node-samples", "-1"], want=R,
             expect="--node-samples"),
        dict(name="quantize --eval-batch-size 0", args=["quantize", run(), "--quick", "--eval-batch-size", "0"], want=R,
             expect="--eval-batch-size"),
        dict(name="quantize --exclude-worst -1", args=["quantize", run(), "--quick", "--exclude-worst", "-1"], want=R,
             expect="--exclude-worst"),
        # audit
        dict(name="audit truncated safetensors", args=["audit", "--model", f["trunc"], "--data", root / "ids.csv", "--quick", "--out",
                                                       root / "a1"], want=R, expect="safetensors"),
        dict(name="audit --max-length 1000", args=["audit", "--model", f["tiny"], "--data", root / "ids.csv", "--quick", "--max-length",
                                                   "1000", "--out", root / "a2"], want=R, expect="--max-length", no_path=root / "a2"),
        dict(name="audit --out is a file", args=["audit", "--model", f["tiny"], "--data", root / "ids.csv", "--quick", "--out",
                                                 root / "file"], want=R, expect="file"),
        dict(name="audit --data cp1252", args=["audit", "--model", f["tiny"], "--data", root / "cp1252.csv", "--quick", "--out",
                                               root / "a3"], want=R, expect="UTF-8", no_path=root / "a3"),
        dict(name="audit masked-LM", args=["audit", "--model", f["mlm"], "--data", root / "ids.csv", "--quick", "--out", root / "a4"],
             want=R, expect="classification head", no_path=root / "a4"),
        # ondevice
        dict(name="ondevice truncated safetensors", args=["ondevice", "--model", f["trunc"], "--runs", root / "r14"], want=R,
             expect="safetensors", no_path=root / "r14"),
        dict(name="ondevice --steps 1e12", danger=True, args=["ondevice", "--steps", "1000000000000", "--runs", root / "r15"], want=R,
             expect="--steps", no_path=root / "r15"),
        dict(name="ondevice --steps 0", args=["ondevice", "--steps", "0", "--runs", root / "r16"], want=R, expect="--steps",
             no_path=root / "r16"),
        # demo
        dict(name="demo --backends eager,tensorrt", args=["demo", "--quick", "--backends", "eager,tensorrt", "--runs", root / "r17"],
             want=R, expect="tensorrt", no_path=root / "r17"),
        dict(name="demo --steps 0", args=["demo", "--quick", "--steps", "0", "--runs", root / "r18"], want=R, expect="--steps",
             no_path=root / "r18"),
        dict(name="demo --runs is a file", args=["demo", "--quick", "--runs", root / "file"], want=R, expect="file"),
        dict(name="data --source missing", args=["data", "--source", root / "nope.csv"], want=R, expect="nope.csv"),
        dict(name="fuse --variants bogus", args=["fuse", run(), "--variants", "bogus"], want=R, expect="bogus"),
        dict(name="quantize --preset bogus", args=["quantize", run(), "--preset", "bogus"], want=R, expect="bogus"),
        dict(name="audit --presets bogus", args=["audit", "--model", f["tiny"], "--data", root / "ids.csv", "--presets", "bogus", "--out",
                                                 root / "a5"], want=R, expect="bogus", no_path=root / "a5"),
        dict(name="audit --text-column nope", args=["audit", "--model", f["tiny"], "--data", root / "ids.csv", "--text-column", "nope",
                                                    "--out", root / "a6"], want=R, expect="nope", no_path=root / "a6"),
        dict(name="export --model masked-LM run dir", args=["export", "--model", f["mlm"], *q, "--run-dir", root / "r19"], want=R,
             expect="classification head", no_path=root / "r19"),
        dict(name="quantize bare .onnx in read-only folder", args=["quantize", f["ro_graph"], "--quick", "--node-samples", "0",
                                                                   "--run-dir", root / "q-out"], want=H) if f.get("ro_graph") else None,
        # more
        dict(name="x: quantize --exclude no-such-node", args=["quantize", run(), "--quick", "--exclude", "no_such_node"], want=R,
             expect="no_such_node"),
        dict(name="x: export --opset 99", args=["export", "--model", "tiny", "--opset", "99", "--runs", root / "x1"], want=R, expect="99",
             no_path=root / "x1"),
        dict(name="x: fuse --threads 0", args=["fuse", run(), "--threads", "0"], want=R, expect="--threads"),
        dict(name="x: train class of 2 rows", args=["train", "--data", root / "tinyclass.csv", "--runs", root / "x2"], want=R,
             expect="rare", no_path=root / "x2"),
        dict(name="x: compare --backends eager,bogus", args=["compare", "--backends", "eager,bogus", "--runs", root / "x3"], want=R,
             expect="bogus", no_path=root / "x3"),
        dict(name="x: quantize --search --budget-overall 2", args=["quantize", run(), "--search", "--budget-overall", "2"], want=R,
             expect="2"),
        dict(name="x: ondevice masked-LM", args=["ondevice", "--model", f["mlm"], "--runs", root / "x4"], want=R,
             expect="classification head", no_path=root / "x4"),
        dict(name="x: export --model a run without training", args=["export", "--model", run(), "--preset", "quick"], want=R,
             expect="train"),
        dict(name="x: audit --slice-column nope", args=["audit", "--model", f["tiny"], "--data", root / "ids.csv", "--slice-column",
                                                        "nope", "--out", root / "x5"], want=R, expect="nope", no_path=root / "x5"),
        dict(name="x: quantize --shapes 1x1", args=["quantize", run(), "--quick", "--shapes", "1x1"], want=R, expect="1x1"),
        dict(name="x: data --source a folder", args=["data", "--source", root], want=R, expect="folder"),
        dict(name="x: fuse a folder with no export", args=["fuse", root / "tiny"], want=R, expect="tiny"),
        # runs
        dict(name="runs on a file", args=["runs", "--runs", root / "file"], want=R, expect="file"),
    ]


def judge(case: dict, r) -> tuple[str, str]:
    out = r.stdout + r.stderr
    if "Traceback" in out:
        last = [line for line in out.strip().splitlines() if line.strip()][-1]
        return "traceback", last[:200]
    if case["want"] == "refuse":
        err = r.stderr.strip()
        lines = [line for line in err.splitlines() if line.strip() and "Warning" not in line and not line.startswith("  warnings.warn")]
        if r.returncode != 2:
            return "wrong", f"exit {r.returncode}: {(err or r.stdout)[-200:]}"
        if case["expect"].lower() not in err.lower():
            return "wrong", f"message does not name {case['expect']!r}: {err[-200:]}"
        if case.get("no_path") is not None and Path(case["no_path"]).exists():
            return "wrong", f"left {case['no_path']} behind: {err[-150:]}"
        return "refused cleanly", (lines[-1] if lines else "")[:200]
    return ("handled" if r.returncode in (0, 1, 3) else "wrong"), f"exit {r.returncode}: {(r.stderr or r.stdout).strip()[-160:]}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="run the cases whose name contains this")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", help="write the outcomes to this JSON file")
    ap.add_argument("--skip-danger", action="store_true",
                    help="do not run the cases that load the machine (64 processes, memory until killed); count them "
                         "as wrong, as seen before the fix")
    a = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bad-inputs-"))
    f: dict = {}
    try:
        f = fixtures(root)
        todo = [c for c in cases(root, f) if c is not None and (not a.only or a.only in c["name"])]

        def one(c):
            if a.skip_danger and c.get("danger"):
                return c["name"], "wrong", "not run (--skip-danger): loads the machine until killed"
            try:
                r = cli(*c["args"], cwd=root)
            except subprocess.TimeoutExpired:
                return c["name"], "wrong", "timed out"
            return (c["name"], *judge(c, r))

        with ThreadPoolExecutor(a.jobs) as pool:
            rows = list(pool.map(one, todo))
        counts: dict[str, int] = {}
        for name, outcome, detail in rows:
            counts[outcome] = counts.get(outcome, 0) + 1
            print(f"{outcome:16s} {name:36s} {detail}")
        print("counts:", json.dumps(counts))
        if a.json:
            Path(a.json).write_text(json.dumps({"counts": counts, "cases": rows}, indent=2))
    finally:
        if f.get("ro_mounted"):
            subprocess.run(["umount", str(root / "readonly")], capture_output=True)
        if f.get("ro_graph"):
            subprocess.run(["umount", str(root / "ro-run" / "export")], capture_output=True)
        (root / "readonly").chmod(0o755)
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
