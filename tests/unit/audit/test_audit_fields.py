"""Every field of the audit's config: a value one of its stages would refuse is refused when the config is
made, in one line naming the field (its flag on the command line), before anything runs; on the command line, exit 2 and no
output folder. A field added to AuditConfig without a case here fails the first test."""

from __future__ import annotations

import pytest

from helpers.audit_fixtures import make_rows, train_tiny_classifier, write_csv
from helpers.config_cases import assert_every_field_has_a_case, assert_refused

# field: (the flag and a value the command line is given, words of the one-line reason); refused when the config is
# made (the stages' own configs are built from it) or, for the data's columns and file, when the data is read: both
# before any stage runs
ON_THE_COMMAND_LINE = {
    "data": (("--data", "missing.csv"), "missing.csv"),
    "text_column": (("--text-column", "body"), "body"),
    "label_column": (("--label-column", "stars"), "stars"),
    "slice_columns": (("--slice-column", "region"), "region"),
    "presets": (("--presets", "int3"), "int3"),
    "budget_overall": (("--budget-overall", "-0.5"), "--budget-overall is a fraction of accuracy a variant may lose, "
                                                    "from 0 up to 1 (0.02 = 2 points), got -0.5"),
    "budget_slice": (("--budget-slice", "1"), "--budget-slice is a fraction of accuracy"),
    "min_speedup": (("--min-speedup", "-1"), "--min-speedup is a speed-up over the FP32 graph"),
    "n_boot": (("--n-boot", "50"), "--n-boot must be at least 100 for a 95% interval to mean anything, got 50"),
    "calibration_size": (("--calibration-size", "4"), "--calibration-size must be from 8 to 100000 rows, got 4"),
    "max_length": (("--max-length", "5"), "--max-length must be from 8 to 4096 tokens, got 5"),
    "eval_batch_size": (("--eval-batch-size", "0"), "--eval-batch-size must be >= 1"),
    "fusion": (("--fusion", "fastest"), "--fusion must be one of ['timed', 'full'], got 'fastest'"),
    "engine": (("--engine", "spark"), "engine must be one of local, ray, got 'spark'"),
    "ray_address": (("--ray-address", "127.0.0.1:1"), "--ray-address '127.0.0.1:1' is for engine ray"),
    "ray_threads": (("--ray-threads", "0"), "--ray-threads must be a whole number of at least 1, got 0"),
    "ray_actors": (("--ray-actors", "0"), "--ray-actors must be a whole number of at least 1, got 0"),
}
# fields with no flag, or a value the command line cannot carry: refused by the library
IN_THE_LIBRARY = {
    "seed": (1.5, "seed must be a whole number, got 1.5"),
    "node_error_samples": (-1, "node_error_samples must be 0 (skip) or more texts, got -1"),
    "calibration_fraction": (0.9, "calibration_fraction must be in (0, 0.5], got 0.9"),
}
# switches: either value is a valid audit
SWITCHES = {"quick", "include_small_slices"}


@pytest.fixture(scope="module")
def audit_model_folder(tmp_path_factory):
    return train_tiny_classifier(tmp_path_factory.mktemp("audit-fields") / "classifier", steps=2)


def test_every_field_has_a_case():
    from workbench.audit import AuditConfig

    assert_every_field_has_a_case(AuditConfig, ON_THE_COMMAND_LINE, IN_THE_LIBRARY, SWITCHES)


@pytest.mark.parametrize("name", sorted(IN_THE_LIBRARY))
def test_the_library_refuses_what_a_stage_would(name):
    from workbench.audit import AuditConfig, AuditInputError

    value, words = IN_THE_LIBRARY[name]
    assert_refused(lambda: AuditConfig(data="reviews.csv", **{name: value}), AuditInputError, words)


def test_the_command_line_refuses_every_field_with_exit_2_before_any_stage(audit_model_folder, tmp_path, capsys, monkeypatch):
    from dataclasses import replace

    from workbench.cli import main
    from workbench.workflows.stages import STAGES

    csv = write_csv(tmp_path / "reviews.csv", make_rows(60, seed=2))
    monkeypatch.chdir(tmp_path)  # "missing.csv" is looked for here
    ran: list[str] = []
    monkeypatch.setitem(STAGES, "export", replace(STAGES["export"], run=lambda cfg, st, job: ran.append("export")))
    for name, ((flag, value), words) in ON_THE_COMMAND_LINE.items():
        out = tmp_path / f"out-{name}"
        args = ["audit", "--model", str(audit_model_folder), "--data", str(csv), "--text-column", "review",
                "--label-column", "sentiment", "--out", str(out), "--quick"]
        if flag in args:
            args[args.index(flag) + 1] = value
        else:
            args += [flag, value]
        code = main(args)
        err = capsys.readouterr().err.strip()
        assert code == 2, (name, err)
        assert words in err and len(err.splitlines()) == 1, (name, err)
        assert not out.exists(), f"{name}: the output folder was written before the value was refused"
    assert ran == [], "a stage ran"
