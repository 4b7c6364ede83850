"""The sessions work where no widget library is loaded: a script imports them, opens saved results and
runs a stage, and ipywidgets, IPython and traitlets never enter the process."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest


@pytest.mark.slow
def test_sessions_run_and_open_results_with_no_widget_machinery_loaded(quant_tiny_dynamic, tmp_path) -> None:
    script = textwrap.dedent(f"""
        import json, sys
        from workbench.doctor.checks import Check, DoctorReport
        from workbench.sessions.doctor import DoctorSession
        from workbench.sessions.embed import EmbedSession
        from workbench.sessions.graph import GraphSession
        from workbench.sessions.ondevice import OnDeviceSession
        from workbench.sessions.quant import QuantSession
        from workbench.sessions.train import CompareSession, TrainSession

        doctor = DoctorSession()
        doctor.open(DoctorReport([Check("python", True, "3")]))
        quant = QuantSession(run_dir={str(tmp_path / "run")!r})
        opened = quant.open({str(quant_tiny_dynamic.out_dir)!r})
        again = quant.quantize("dynamic-per-channel", n_boot=100)  # a stage run through the library, on the saved baseline
        for s in (GraphSession(), OnDeviceSession(), EmbedSession(), TrainSession(), CompareSession()):
            s.close()
        print(json.dumps({{"doctor_ok": doctor.ok, "results": sorted(quant.results), "graph": str(quant.graph),
                          "again": [again.name, str(again.out_dir), str(again.baseline_path)],
                          "loaded": [m for m in ("ipywidgets", "IPython", "traitlets", "widgets") if m in sys.modules]}}))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["loaded"] == [], f"widget machinery loaded by the sessions: {out['loaded']}"
    assert out["doctor_ok"] is True
    name, out_dir, baseline = out["again"]
    assert sorted(out["results"]) == sorted([quant_tiny_dynamic.name, name])
    assert out_dir.startswith(str(tmp_path / "run" / "quantize")), "written into the session's run folder"
    assert baseline == str(quant_tiny_dynamic.baseline_path), "the FP32 baseline is scored once and reused"
    assert out["graph"] == str(quant_tiny_dynamic.source_path), "a saved quantization names the FP32 graph to quantize again"
