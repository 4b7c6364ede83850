"""Every bad input one line (exit 2, the value named, no traceback), one writer per run
folder, a report pair that is never half new, nothing left behind by a refusal.

Every case drives the real CLI in a subprocess (``python -m workbench.cli``; PYTHONPATH inherited).
The fixtures are tiny: the tiny BERT saved as a checkpoint, a masked-LM checkpoint, one quick export.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.pause import wait_paused

PY = sys.executable


def cli(*args, cwd=None, env=None, timeout=300, preexec_fn=None):
    return subprocess.run([PY, "-m", "workbench.cli", *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, **(env or {})}, timeout=timeout, preexec_fn=preexec_fn)


def start(*args, cwd=None, env=None):
    return subprocess.Popen([PY, "-m", "workbench.cli", *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=cwd, env={**os.environ, **(env or {})})


def refused(r, *named):
    """Exit 2, one error line naming every one of ``named``, no traceback."""
    out = r.stdout + r.stderr
    assert "Traceback" not in out, out[-3000:]
    assert r.returncode == 2, f"exit {r.returncode}: {out[-2000:]}"
    errors = [line for line in r.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, r.stderr
    for value in named:
        assert str(value) in errors[0], f"{value!r} not named in: {errors[0]}"
    return errors[0]


@pytest.fixture(scope="module")
def fx(tmp_path_factory):
    root = tmp_path_factory.mktemp("reliability")
    code = """
import sys
from transformers import BertConfig, BertForMaskedLM
from workbench.models.load import TINY_CONFIG, load_model
m = load_model('tiny')
m.model.save_pretrained(sys.argv[1] + '/tiny'); m.tokenizer.save_pretrained(sys.argv[1] + '/tiny')
BertForMaskedLM(BertConfig(vocab_size=m.tokenizer.vocab_size, **TINY_CONFIG)).save_pretrained(sys.argv[1] + '/mlm')
m.tokenizer.save_pretrained(sys.argv[1] + '/mlm')
"""
    subprocess.run([PY, "-c", code, str(root)], check=True, capture_output=True)
    trunc = root / "trunc"
    shutil.copytree(root / "tiny", trunc)
    w = trunc / "model.safetensors"
    w.write_bytes(w.read_bytes()[: w.stat().st_size // 2])
    run = root / "run"
    r = cli("export", "--model", "tiny", "--preset", "quick", "--validation-examples", "4", "--run-dir", run)
    assert r.returncode == 0, r.stderr
    rows = [f"{'great' if i % 2 else 'bad'} film number {i},{'pos' if i % 2 else 'neg'}" for i in range(40)]
    (root / "cp1252.csv").write_bytes(("text,label\n" + "\n".join(rows) + "\ncaf\u00e9 \u201cgood\u201d,pos\n").encode("cp1252"))
    (root / "bad.jsonl").write_text('{"text": "fine", "label": "pos"}\n{"text": "cut", "label": \n')
    (root / "ids.csv").write_text("text,label\n" + "\n".join(r.replace(",pos", ",1").replace(",neg", ",0") for r in rows) + "\n")
    (root / "unknown.csv").write_text("text,label\n" + "\n".join(r.replace(",pos", ",maybe") for r in rows) + "\n")
    (root / "garbage.onnx").write_bytes(b"not a graph at all " * 20)
    g = (run / "export" / "model.onnx").read_bytes()
    (root / "half.onnx").write_bytes(g[: len(g) // 3])
    (root / "file").write_text("a file, not a folder")
    corrupt = root / "corrupt"
    shutil.copytree(run, corrupt)
    (corrupt / "export" / "export.json").write_text('{"opset": 17, "onnx_pa')
    return root


def copy_run(fx, name):
    dst = fx / name
    if not dst.exists():
        shutil.copytree(fx / "run", dst)
    return dst


# ---- the tracebacks and silent wrongs once found, each one line now ------------------------------

def test_train_data_missing(fx):
    refused(cli("train", "--data", fx / "nope.csv", "--runs", fx / "r-missing"), "nope.csv")
    assert not (fx / "r-missing").exists()


def test_compare_data_not_utf8_says_save_as_utf8(fx):
    line = refused(cli("compare", "--data", fx / "cp1252.csv", "--steps", "1", "--runs", fx / "r-cp"), "cp1252.csv", "UTF-8")
    assert "line 42" in line  # the header, 40 rows, then the first row with a Windows-1252 byte
    assert not (fx / "r-cp").exists()


def test_jsonl_error_gives_the_line_number(fx):
    refused(cli("train", "--data", fx / "bad.jsonl", "--runs", fx / "r-jsonl"), "bad.jsonl", "line 2")


@pytest.mark.parametrize("flag", ["--run-dir", "--runs"])
def test_export_into_a_file(fx, flag):
    refused(cli("export", "--model", "tiny", "--preset", "quick", flag, fx / "file"), str(fx / "file"), flag)


def test_export_into_proc(fx):
    refused(cli("export", "--model", "tiny", "--preset", "quick", "--runs", "/proc/x"), "/proc/x")


def test_export_truncated_safetensors(fx):
    refused(cli("export", "--model", fx / "trunc", "--preset", "quick", "--runs", fx / "r-trunc"),
            fx / "trunc" / "model.safetensors", "truncated")
    assert not (fx / "r-trunc").exists()


def test_audit_truncated_safetensors(fx):
    refused(cli("audit", "--model", fx / "trunc", "--data", fx / "ids.csv", "--quick", "--out", fx / "a-trunc"),
            "model.safetensors")
    assert not (fx / "a-trunc").exists()


def test_ondevice_truncated_safetensors(fx):
    refused(cli("ondevice", "--model", fx / "trunc", "--runs", fx / "r-od"), "model.safetensors")
    assert not (fx / "r-od").exists()


def test_export_of_a_masked_lm_checkpoint_is_refused(fx):
    refused(cli("export", "--model", fx / "mlm", "--preset", "quick", "--run-dir", fx / "r-mlm"),
            "this checkpoint has no classification head", "ForSequenceClassification", "BertForMaskedLM")
    assert not (fx / "r-mlm").exists()  # a refusal leaves no empty run folder


def test_audit_max_length_checked_against_the_model(fx):
    refused(cli("audit", "--model", fx / "tiny", "--data", fx / "ids.csv", "--quick", "--max-length", "1000",
                "--out", fx / "a-len"), "--max-length 1000", "max_position_embeddings")
    assert not (fx / "a-len").exists()


def test_fuse_garbage_and_truncated_onnx(fx):
    for name in ("garbage.onnx", "half.onnx"):
        refused(cli("fuse", fx / name, "--preset", "inspect"), name, "not a readable ONNX graph")
    assert not (fx / "fusion").exists()


def test_fuse_missing_path_creates_nothing(fx):
    refused(cli("fuse", fx / "missing" / "deep" / "m.onnx"), "missing/deep/m.onnx")
    assert not (fx / "missing").exists()


def test_corrupt_export_json_names_the_file_and_the_fix(fx):
    line = refused(cli("fuse", fx / "corrupt", "--preset", "inspect"), fx / "corrupt" / "export" / "export.json", "corrupt")
    assert f"workbench export --model MODEL --run-dir {fx / 'corrupt'}" in line
    refused(cli("quantize", fx / "corrupt", "--quick"), "export.json", "corrupt")


def test_quantize_names_labels_the_model_does_not_know(fx):
    run = copy_run(fx, "run-labels")
    refused(cli("quantize", run, "--quick", "--node-samples", "0", "--data", fx / "unknown.csv"), "maybe", "rotten")
    assert not (run / "quantize").exists()  # its stage folder went with the refusal


def test_demo_unknown_backend_lists_the_valid_ones(fx):
    refused(cli("demo", "--quick", "--backends", "eager,tensorrt", "--runs", fx / "r-demo"),
            "--backends", "tensorrt", "eager, ortmodule, compile")
    assert not (fx / "r-demo").exists()


@pytest.mark.parametrize("value, named", [("0", "'0'"), ("64", "64")])
def test_nproc_is_bounded_by_the_cores(fx, value, named):
    if value == "64" and (os.cpu_count() or 1) >= 64:
        pytest.skip("this machine has 64 cores")
    refused(cli("train", "--nproc", value, "--runs", fx / "r-nproc"), "--nproc", named)
    assert not (fx / "r-nproc").exists()


def test_ondevice_absurd_steps_refused_before_any_batch(fx):
    refused(cli("ondevice", "--steps", "1000000000000", "--runs", fx / "r-steps"), "--steps", "1000000000000")
    assert not (fx / "r-steps").exists()  # refused up front: no run folder, no batch built


def test_config_messages_speak_in_flags(fx):
    refused(cli("train", "--max-length", "0", "--runs", fx / "r-ml"), "--max-length", "0")
    refused(cli("export", "--model", "tiny", "--max-length", "100000", "--runs", fx / "r-ml"), "--max-length", "100000")


def test_disk_full_while_writing_is_one_line_and_keeps_the_old_result(fx):
    run = copy_run(fx, "run-full")
    before = (run / "export" / "export.json").read_bytes()
    import resource

    def small_files():  # RLIMIT_FSIZE: writing past 64 KiB raises EFBIG (Python ignores SIGXFSZ)
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))

    r = cli("export", "--model", "tiny", "--preset", "quick", "--validation-examples", "4", "--run-dir", run,
            preexec_fn=small_files)
    refused(r, "File too large", str(run), "--run-dir")
    assert (run / "export" / "export.json").read_bytes() == before
    assert not [p for p in (run / "export").iterdir() if ".tmp" in p.name]


@pytest.mark.slow  # a long run for make test-fast: 8 s on 2 cores
def test_quantize_keeps_its_temporaries_out_of_a_read_only_source_folder(fx, tmp_path):
    shutil.copytree(fx / "run", tmp_path / "run")
    src = tmp_path / "run" / "export"
    if subprocess.run(["mount", "--bind", str(src), str(src)], capture_output=True).returncode != 0:
        pytest.skip("cannot bind-mount a read-only folder here (needs CAP_SYS_ADMIN)")
    try:
        assert subprocess.run(["mount", "-o", "remount,bind,ro", str(src)], capture_output=True).returncode == 0
        listing = sorted(p.name for p in src.iterdir())
        out = tmp_path / "q"
        r = cli("quantize", src / "model.onnx", "--quick", "--node-samples", "0", "--n-boot", "100", "--run-dir", out)
        assert "Traceback" not in r.stdout + r.stderr and r.returncode in (0, 1), r.stderr[-2000:]
        assert sorted(p.name for p in src.iterdir()) == listing
        assert (out / "quantize.json").is_file() and not [p for p in out.iterdir() if "scratch" in p.name]
    finally:
        subprocess.run(["umount", str(src)], capture_output=True)


# ---- one writer per run folder ------------------------------------------------------------------------

def _pause(tmp_path, point):
    fifo = tmp_path / f"pause-{point.replace(':', '-')}"
    os.mkfifo(fifo)
    return fifo, {"WORKBENCH_PAUSE_AT": f"{point}={fifo}"}


@pytest.mark.slow  # a long run for make test-fast: 8 s on 2 cores
def test_second_writer_is_refused_naming_the_holder_and_a_stale_lock_is_taken_over(fx, tmp_path):
    run = copy_run(fx, "run-lock")
    fifo, env = _pause(tmp_path, "locked")
    first = start("export", "--model", "tiny", "--preset", "quick", "--validation-examples", "4", "--run-dir", run, env=env)
    try:
        pid = wait_paused(fifo, first)  # the first export holds the run's lock, paused
        assert pid == first.pid
        second = cli("fuse", run, "--preset", "inspect")
        line = refused(second, f"PID {first.pid}", "workbench export", str(run))
        assert first.poll() is None  # refused while the holder still runs (paused): it did not wait for it
        assert "--run-dir" in line
        assert not (run / "fusion").exists()
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    # the holder died under SIGKILL: its lock file still names it; the next writer takes over, saying so
    third = cli("fuse", run, "--preset", "inspect", "--variants", "transformer")
    assert third.returncode == 0, third.stderr[-2000:]
    assert f"took over the lock of {run} left by PID {first.pid}" in third.stderr
    assert "Traceback" not in third.stderr


@pytest.mark.slow  # a long run for make test-fast: 8 s on 2 cores
def test_two_audits_into_one_out_folder(fx, tmp_path):
    out = tmp_path / "audit"
    fifo, env = _pause(tmp_path, "locked")
    first = start("audit", "--model", fx / "tiny", "--data", fx / "ids.csv", "--quick", "--out", out, env=env)
    try:
        wait_paused(fifo, first)
        refused(cli("audit", "--model", fx / "tiny", "--data", fx / "ids.csv", "--quick", "--out", out),
                f"PID {first.pid}", "--out")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()


# ---- the report pair, killed between its two files -------------------------------------------------------

_WRITE = "import sys; from workbench.report import write_run_report; write_run_report(sys.argv[1])"


def _pair(folder):
    s, r = folder / "summary.json", folder / "report.html"
    return s.read_bytes(), r.read_bytes(), os.path.dirname(os.path.realpath(s)), os.path.dirname(os.path.realpath(r))


@pytest.mark.slow  # a long run for make test-fast: 17 s each on 2 cores
@pytest.mark.parametrize("point", ["report.html:write", "swap"])
def test_report_pair_killed_between_its_files_shows_the_old_pair(fx, tmp_path, point):
    run = copy_run(fx, f"run-report-{point.split(':')[0]}")
    first = subprocess.run([PY, "-c", _WRITE, str(run)], capture_output=True, text=True)
    assert first.returncode == 0, first.stderr[-2000:]
    old = _pair(run)
    assert old[2] == old[3]  # both files from one generation
    (run / "export" / "export.json").write_text(  # a change the next report shows
        (run / "export" / "export.json").read_text().replace('"opset": 17', '"opset": 17 '))
    fifo, env = _pause(tmp_path, point)
    writer = subprocess.Popen([PY, "-c", _WRITE, str(run)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, **env})
    try:
        wait_paused(fifo, writer)  # summary.json of the new pair is written; report.html is not (or not swapped in)
        writer.send_signal(signal.SIGKILL)
    finally:
        writer.wait()
    assert writer.returncode == -signal.SIGKILL
    assert _pair(run) == old  # a reader sees the old pair, whole
    stale = [p for p in run.iterdir() if p.name.startswith(".report.") and p.name.endswith(".tmp")]
    if point == "report.html:write":
        assert stale  # the half-written generation, until the next start cleans it
    # the next writer (a command taking the run's lock) cleans what the killed one left, then writes a new pair
    r = cli("fuse", run, "--preset", "inspect", "--variants", "transformer")
    assert r.returncode == 0, r.stderr[-2000:]
    assert not [p for p in run.rglob(".*") if ".tmp" in p.name]
    again = subprocess.run([PY, "-c", _WRITE, str(run)], capture_output=True, text=True)
    assert again.returncode == 0
    new = _pair(run)
    assert new[2] == new[3] and new[2] != old[2]
    assert json.loads(new[0])  # a whole summary


# ---- torchrun workers die with their parent ------------------------------------------------------------

def _descendants(pid):
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True).stdout
    children: dict[int, list[int]] = {}
    for line in out.splitlines():
        p, pp = map(int, line.split())
        children.setdefault(pp, []).append(p)
    found, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            found.append(c)
            todo.append(c)
    return found


@pytest.mark.timeout(600)
def test_torchrun_workers_die_with_a_killed_parent(fx):
    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs 2 cores for --nproc 2")
    parent = start("train", "--nproc", "2", "--steps", "100000", "--json", "--runs", fx / "r-ddp")
    try:
        end = time.monotonic() + 300
        workers = []
        while time.monotonic() < end:  # torchrun's agent and its two workers
            workers = _descendants(parent.pid)
            if len(workers) >= 3:
                break
            assert parent.poll() is None, parent.stderr.read()[-2000:]
            time.sleep(0.5)
        assert len(workers) >= 3, workers
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        end = time.monotonic() + 30
        alive = workers
        while alive and time.monotonic() < end:
            time.sleep(0.5)
            alive = [p for p in workers if Path(f"/proc/{p}").exists()
                     and "Z" not in Path(f"/proc/{p}/stat").read_text().split()[2]]
        assert not alive, f"still running after the parent's SIGKILL: {alive}"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


@pytest.mark.parametrize("command", ["export", "fuse", "quantize"])
def test_read_only_run_dir_is_one_line(fx, tmp_path, command):
    ro = tmp_path / "ro"
    ro.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(ro)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a read-only tmpfs here (needs CAP_SYS_ADMIN); root ignores permission bits")
    try:
        args = {"export": ["export", "--model", "tiny", "--preset", "quick"],
                "fuse": ["fuse", fx / "run", "--preset", "inspect"],
                "quantize": ["quantize", fx / "run", "--quick", "--node-samples", "0"]}[command]
        refused(cli(*args, "--run-dir", ro / "x"), str(ro / "x"), "Read-only file system", "--run-dir")
    finally:
        subprocess.run(["umount", str(ro)], capture_output=True)


def test_audit_of_a_masked_lm_checkpoint_is_refused(fx):
    refused(cli("audit", "--model", fx / "mlm", "--data", fx / "ids.csv", "--quick", "--out", fx / "a-mlm"),
            "this checkpoint has no classification head", "BertForMaskedLM")
    assert not (fx / "a-mlm").exists()
