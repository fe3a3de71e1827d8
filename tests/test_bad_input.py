"""Every malformed input: one line on stderr naming file, line/key path and what was expected; exit 2."""

import pytest
from conftest import MINIMAL, SCENARIOS


def assert_one_line_error(result, *fragments):
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in result.output + result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def test_minimal_scenario_is_valid(run, scenario_file):
    result = run("validate", scenario_file(MINIMAL))
    assert result.exit_code == 0, result.stderr
    assert "ok: scenario 'tiny', 1 workload(s) (training)" in result.stdout


def test_yaml_syntax_error_names_the_line(run, scenario_file):
    path = scenario_file(
        "name: x\nworkloads:\n  - name: [unclosed\n    kind: training\n"
    )
    assert_one_line_error(run("validate", path), f"{path}:", "YAML syntax error")


def test_unknown_key_suggests_the_close_one(run, scenario_file):
    path = scenario_file(MINIMAL + "    time_budgt: 2h\n")
    line = assert_one_line_error(
        run("validate", path),
        f"{path}:8",
        "unknown key 'time_budgt'",
        "did you mean 'time_budget'?",
    )
    assert "workloads[0].time_budgt" in line


def test_unknown_top_level_key_lists_what_is_allowed(run, scenario_file):
    path = scenario_file(MINIMAL + "zzz: 1\n")
    assert_one_line_error(
        run("validate", path),
        f"{path}:8",
        "unknown key 'zzz'",
        "expected one of:",
        "workloads",
    )


def test_unknown_nested_key(run, scenario_file):
    path = scenario_file(
        MINIMAL.replace("{per_gpu: 20GiB}", "{per_gpu: 20GiB, shardible: true}")
    )
    assert_one_line_error(
        run("validate", path),
        f"{path}:6",
        "unknown key 'shardible'",
        "did you mean 'shardable'?",
    )


def test_wrong_type(run, scenario_file):
    path = scenario_file(MINIMAL + "    gpus: {min: lots}\n")
    assert_one_line_error(
        run("validate", path), f"{path}:8", "workloads[0].gpus.min", "integer", "'lots'"
    )


@pytest.mark.parametrize("value", ['"8"', "[1, 8]", "true"])
def test_gpu_count_neither_number_nor_range(run, scenario_file, value):
    path = scenario_file(MINIMAL + f"    gpus: {value}\n")
    assert_one_line_error(
        run("validate", path),
        f"{path}:8",
        "workloads[0].gpus",
        "expected a number of GPUs (gpus: 8) or a range (gpus: {min: 1, max: 8})",
    )


@pytest.mark.parametrize(
    "text, key, line",
    [
        ("    gpus: {min: true}\n", "workloads[0].gpus.min", 8),
        ("    lora_rank: false\n", "workloads[0].lora_rank", 8),
        ("    checkpoint: {keep: true}\n", "workloads[0].checkpoint.keep", 8),
    ],
)
def test_true_or_false_for_a_number_is_refused(run, scenario_file, text, key, line):
    """pydantic's lax mode read true as 1 and false as 0: `lora_rank: false` planned a rank-0 adapter."""
    path = scenario_file(MINIMAL + text)
    assert_one_line_error(
        run("validate", path), f"{path}:{line}", f"({key})", "expected a number, got "
    )


@pytest.mark.parametrize(
    "text, key, fragment",
    [
        (
            "    checkpoint: 5\n",
            "workloads[0].checkpoint",
            "expected a mapping of keys (every, write_time, asynchronous, size, keep), got 5",
        ),
        (
            "    data: 2GiB\n",
            "workloads[0].data",
            "expected a mapping of keys (size, location, epochs, sample_size), got '2GiB'",
        ),
        (
            "constraints: [1]\n",
            "constraints",
            "expected a mapping of keys (budget, gpu_quotas",
        ),
    ],
)
def test_a_section_given_as_a_value_names_its_keys(
    run, scenario_file, text, key, fragment
):
    """pydantic said 'input should be a valid dictionary or instance of Checkpointing'."""
    path = scenario_file(MINIMAL + text)
    line = assert_one_line_error(run("validate", path), f"{key})", fragment)
    assert "instance of" not in line


def test_workloads_given_as_a_value_expects_a_list(run, scenario_file):
    path = scenario_file("name: x\ncatalogs: [aws]\nworkloads: 3\n")
    assert_one_line_error(
        run("validate", path), f"{path}:3", "(workloads)", "expected a list, got 3"
    )


def test_wrong_literal_suggests(run, scenario_file):
    path = scenario_file(MINIMAL.replace("kind: training", "kind: trainig"))
    assert_one_line_error(
        run("validate", path), f"{path}:5", "'trainig'", "did you mean 'training'?"
    )


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("    time_budget: -3h\n", "greater than 0"),
        ("    time_budget: 0\n", "greater than 0"),
        ("    checkpoint: {size: -5GiB}\n", "greater than or equal to 0"),
    ],
)
def test_negative_or_zero_times_and_sizes(run, scenario_file, text, fragment):
    path = scenario_file(MINIMAL + text)
    assert_one_line_error(run("validate", path), f"{path}:8", fragment)


def test_zero_memory(run, scenario_file):
    path = scenario_file(MINIMAL.replace("20GiB", "0GiB"))
    assert_one_line_error(
        run("validate", path),
        f"{path}:6",
        "workloads[0].memory.per_gpu",
        "greater than 0",
    )


def test_negative_budget(run, scenario_file):
    path = scenario_file(MINIMAL + "constraints: {budget: -$100}\n")
    assert_one_line_error(
        run("validate", path), f"{path}:8", "constraints.budget", "greater than 0"
    )


def test_negative_price_in_a_user_catalog(run, scenario_file, tmp_path):
    header = (
        "provider,region,instance_type,gpu,gpus_per_node,vcpus,ram_gib,gpu_vram_gib,intra_node,intra_node_gbs,"
        "inter_node,inter_node_gbps,on_demand_usd_h,spot_usd_h,spot_preemption_per_h,max_nodes,defaults,notes\n"
    )
    (tmp_path / "mine.csv").write_text(
        "# source: test\n"
        + header
        + "aws,us-east-1,x1,A10G,1,4,16,24,pcie,64,none,0,-2.5,,,,,\n"
    )
    path = scenario_file(MINIMAL.replace("catalogs: [aws]", "catalogs: [mine.csv]"))
    assert_one_line_error(
        run("validate", path), "mine.csv:3", "on_demand_usd_h", "greater than 0"
    )


OFFERS_HEADER = (
    "provider,region,instance_type,gpu,gpus_per_node,vcpus,ram_gib,gpu_vram_gib,intra_node,intra_node_gbs,"
    "inter_node,inter_node_gbps,on_demand_usd_h,spot_usd_h,spot_preemption_per_h,max_nodes,defaults,notes"
)
A10G_ROW = "aws,us-east-1,x1,A10G,1,4,16,24,pcie,64,none,0,2.5,,,,,"


@pytest.mark.parametrize(
    "lines, where, fragment",
    [
        # a value with an unquoted comma: pandas took the first columns as an index and shifted the rest
        (
            [A10G_ROW, A10G_ROW.replace("x1", "x2") + ",extra,more"],
            "mine.csv:4",
            "20 values for the header's 18 columns",
        ),
        (
            ["", A10G_ROW, "# dropped for now", "", A10G_ROW.replace("A10G", "A10X")],
            "mine.csv:7",
            "unknown GPU 'A10X'",
        ),
        (
            [A10G_ROW, 'aws,"us-east-1,x3'],
            "mine.csv:4",
            "unexpected end of data",
        ),  # where the unclosed quote opens
        ([], "mine.csv:2", None),
    ],
)
def test_user_catalog_rows_are_located_at_their_line(
    run, scenario_file, tmp_path, lines, where, fragment
):
    (tmp_path / "mine.csv").write_text(
        "\n".join(
            [
                "# source: test",
                OFFERS_HEADER.replace(",notes", ",notes,notes")
                if fragment is None
                else OFFERS_HEADER,
                *lines,
            ]
        )
        + "\n"
    )
    path = scenario_file(MINIMAL.replace("catalogs: [aws]", "catalogs: [mine.csv]"))
    assert_one_line_error(
        run("validate", path),
        where,
        fragment or "column 'notes' appears twice in the header",
    )


def test_user_catalog_comments_and_blank_lines_anywhere(run, scenario_file, tmp_path):
    (tmp_path / "mine.csv").write_text(
        "\n".join(
            [
                "# source: test",
                "",
                OFFERS_HEADER,
                A10G_ROW,
                "# a note",
                "",
                A10G_ROW.replace("x1", "x2") + ",,",
            ]
        )
        + "\n"
    )
    path = scenario_file(MINIMAL.replace("catalogs: [aws]", "catalogs: [mine.csv]"))
    result = run("validate", path)
    assert result.exit_code == 0, result.stderr
    assert "2 offers from mine.csv" in result.stdout


@pytest.mark.parametrize(
    "value, fragment",
    [
        ("3 fortnights", "unknown time unit 'fortnights'"),
        ("2 hrz", "unknown time unit 'hrz'"),
    ],
)
def test_unknown_time_units(run, scenario_file, value, fragment):
    path = scenario_file(MINIMAL + f"    time_budget: {value}\n")
    assert_one_line_error(run("validate", path), f"{path}:8", fragment)


def test_unknown_size_unit(run, scenario_file):
    path = scenario_file(MINIMAL.replace("20GiB", "20 gigs"))
    assert_one_line_error(
        run("validate", path), f"{path}:6", "unknown size unit 'gigs'"
    )


def test_unknown_gpu(run, scenario_file):
    path = scenario_file(
        MINIMAL.replace("reference_gpu: A100-80GB", "reference_gpu: A100-80G")
    )
    assert_one_line_error(
        run("validate", path), f"{path}:7", "unknown GPU 'A100-80G'", "did you mean"
    )


def test_unknown_model(run, scenario_file):
    text = MINIMAL.replace(
        "    memory: {per_gpu: 20GiB}\n", "    model: llama-3.1-7b\n"
    )
    path = scenario_file(text)
    assert_one_line_error(
        run("validate", path),
        f"{path}:6",
        "unknown model 'llama-3.1-7b'",
        "did you mean",
    )


def test_unknown_catalog(run, scenario_file):
    path = scenario_file(MINIMAL.replace("catalogs: [aws]", "catalogs: [aws, lamda]"))
    assert_one_line_error(
        run("validate", path),
        f"{path}:2",
        "unknown catalog 'lamda'",
        "did you mean 'lambda'?",
    )


@pytest.mark.parametrize(
    "command",
    [("catalog", "show", "aws/us-east-1/p5.48xlarge"), ("catalog", "list"), ("gpus",)],
)
def test_unknown_catalog_option(run, command):
    assert_one_line_error(
        run(*command, "--catalog", "awz"),
        "--catalog",
        "unknown catalog 'awz'",
        "did you mean 'aws'?",
    )


@pytest.mark.parametrize(
    "command, name, fragments",
    [
        (
            "solve",
            "quarter-team.yaml",
            ("quarter-team.yaml:19 (horizon)", "plan it with `planner batch`"),
        ),
        ("estimate", "quarter-budget.yaml", ("(horizon)", "this is a quarter file")),
        (
            "batch",
            "team-quarter-mix.yaml",
            ("team-quarter-mix.yaml:16 (workloads)", "plan it with `planner solve`"),
        ),
    ],
)
def test_the_wrong_command_for_the_file_names_the_right_one(
    run, command, name, fragments
):
    """A quarter file given to `solve` (or a scenario to `batch`) said only "unknown key 'horizon'"."""
    assert_one_line_error(run(command, str(SCENARIOS / name)), *fragments)


def test_missing_user_catalog_file(run, scenario_file):
    path = scenario_file(
        MINIMAL.replace("catalogs: [aws]", "catalogs: [prices/nope.csv]")
    )
    assert_one_line_error(run("validate", path), "nope.csv", "no such offers catalog")


def test_unknown_provider_in_quota(run, scenario_file):
    path = scenario_file(MINIMAL + "constraints:\n  gpu_quotas: {awz: 8}\n")
    assert_one_line_error(
        run("validate", path),
        f"{path}:9",
        "unknown provider 'awz'",
        "did you mean 'aws'?",
    )


def test_unknown_offer_in_node_limits(run, scenario_file):
    path = scenario_file(
        MINIMAL + "constraints:\n  node_limits: {aws/us-east-1/p5.48xlage: 2}\n"
    )
    assert_one_line_error(
        run("validate", path),
        f"{path}:9",
        "unknown offer",
        "did you mean 'aws/us-east-1/p5.48xlarge'?",
    )


def test_memory_and_work_both_missing(run, scenario_file):
    path = scenario_file(
        "name: x\ncatalogs: [aws]\nworkloads:\n  - name: job\n    kind: training\n"
    )
    assert_one_line_error(
        run("validate", path),
        f"{path}:4",
        "workloads[0]",
        "both memory and work are missing",
    )


def test_empty_file(run, scenario_file):
    path = scenario_file("")
    assert_one_line_error(run("validate", path), str(path), "empty")


def test_comment_only_file(run, scenario_file):
    path = scenario_file("# nothing here\n")
    assert_one_line_error(run("validate", path), str(path), "no YAML document")


def test_binary_file(run, tmp_path):
    path = tmp_path / "model.bin"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    assert_one_line_error(run("validate", path), str(path), "binary file")


def test_huge_file_is_refused_before_parsing_and_the_limit_can_be_raised(run, tmp_path):
    path = tmp_path / "huge.yaml"
    path.write_text("# " + "x" * (6 * 2**20) + "\n")
    assert_one_line_error(
        run("--max-input-size", "2MiB", "validate", path),
        str(path),
        "refusing input above 2 MiB",
        "--max-input-size 8MiB",
    )
    # under the default (64 MiB) the same file is read, and found empty of YAML
    assert_one_line_error(run("validate", path), str(path), "no YAML document")


@pytest.mark.parametrize("size", ["100GiB", "1PiB", "1e9GiB"])
def test_a_large_max_input_size_reads_a_small_file(run, scenario_file, size):
    """The file was read with read(limit + 1), which allocates the limit first: a MemoryError at 100GiB."""
    result = run("--max-input-size", size, "validate", scenario_file(MINIMAL))
    assert result.exit_code == 0 and "ok: scenario 'tiny'" in result.stdout, (
        result.output
    )


@pytest.mark.parametrize("size", ["0", "-1", "0.1B", "1e30TiB", "2e9GiB"])
def test_a_max_input_size_of_nothing_or_past_an_exabyte_is_one_line(
    run, scenario_file, size
):
    """1e30TiB was an OverflowError when the file was read; 0 and -1 refused every file as above 0 or -1024 MiB."""
    assert_one_line_error(
        run("--max-input-size", size, "validate", scenario_file(MINIMAL)),
        "--max-input-size: ",
        "expected a size of at least 1B and at most 1e+09GiB",
        repr(size),
    )


def test_alias_bomb_is_refused(run, scenario_file):
    bomb = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i, name in enumerate("bcdefghi"):
        prev = "abcdefghi"[i]
        bomb.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    path = scenario_file("\n".join(bomb) + "\nname: x\n")
    assert_one_line_error(run("validate", path), str(path), "alias bomb")


def test_python_tags_build_no_objects(run, scenario_file):
    path = scenario_file(
        "name: !!python/object/apply:os.system ['echo pwned']\nworkloads: []\n"
    )
    assert_one_line_error(run("validate", path), f"{path}:1", "tags", "not allowed")


def test_duplicate_workload_names(run, scenario_file):
    job = "  - name: job\n    kind: training\n    memory: {per_gpu: 20GiB}\n    work: {gpu_hours: 10, reference_gpu: A10G}\n"
    path = scenario_file("name: x\ncatalogs: [aws]\nworkloads:\n" + job + job)
    assert_one_line_error(
        run("validate", path), f"{path}:8", "duplicate workload name 'job'"
    )


def test_duplicate_yaml_keys(run, scenario_file):
    path = scenario_file(MINIMAL + "name: again\n")
    assert_one_line_error(run("validate", path), f"{path}:", "duplicate")


def test_top_level_list_is_not_a_scenario(run, scenario_file):
    path = scenario_file("- a\n- b\n")
    assert_one_line_error(run("validate", path), str(path), "expected a mapping")


def test_missing_file(run, tmp_path):
    assert_one_line_error(
        run("validate", tmp_path / "nope.yaml"), "nope.yaml", "no such"
    )


def test_one_bad_file_among_good_ones_fails(run, scenario_file):
    good = scenario_file(MINIMAL, "good.yaml")
    bad = scenario_file(MINIMAL + "oops: 1\n", "bad.yaml")
    result = run("validate", good, bad)
    assert result.exit_code == 2


def test_every_shipped_example_validates(run):
    from conftest import SCENARIOS

    files = sorted(SCENARIOS.glob("*.yaml"))
    result = run("validate", *files)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.count(": ok: ") == len(files)


@pytest.mark.parametrize(
    "model, key, fragment",
    [
        (
            "{params: 1B, layers: 16, hidden: 2048}",
            "model.heads",
            "missing required key 'heads'",
        ),
        (
            "{params: 1B, layers: 0, hidden: 2048, heads: 16}",
            "model.layers",
            "greater than 0",
        ),
        (
            "{params: 1B, layers: 16, hidden: 2048, heads: abc}",
            "model.heads",
            "valid integer",
        ),
        (
            "{params: 1B, layers: 16, hidden: 2048, heads: 16, kv_heads: -1}",
            "model.kv_heads",
            "greater than 0",
        ),
        (
            "{params: 1B, layers: 16, hidden: 2048, heads: 16, nme: x}",
            "model.nme",
            "did you mean 'name'?",
        ),
        (
            "{params: 1B, layers: 1000000000000000, hidden: 2048, heads: 16}",
            "model.layers",
            "less than or equal to 100000",
        ),
        (
            "{params: 1B, layers: 16, hidden: 2048, heads: 16, vocab: 100000000000}",
            "model.vocab",
            "less than or equal",
        ),
        (
            "{params: " + "9" * 400 + ", layers: 16, hidden: 2048, heads: 16}",
            "model.params",
            "a number with 400 digits",
        ),
        ("{hf_config: 3}", "model.hf_config", "valid string"),
        ("{hf_config: ''}", "model.hf_config", "at least 1 character"),
    ],
)
def test_inline_model_errors_come_from_the_form_given(
    run, scenario_file, model, key, fragment
):
    path = scenario_file(MINIMAL + f"    model: {model}\n")
    line = assert_one_line_error(
        run("validate", path), f"{path}:8", f"workloads[0].{key})", fragment
    )
    assert "unknown key 'params'" not in line and "unknown key 'hf_config'" not in line


ENDPOINT_QUARTER = """\
name: q
catalogs: [aws]
horizon: {start: 2027-01-04, end: 2027-02-01, step: 6h}
runs:
  - {name: ep, kind: serving, model: llama-3.1-8b, traffic: {requests_per_s: 10}, slo: {ttft: 800ms, tpot: 40ms}, \
release: 2027-01-20, due: 2027-01-10}
"""


@pytest.mark.parametrize("command", ["validate", "batch"])
def test_an_endpoint_due_before_its_release_is_located(run, scenario_file, command):
    path = scenario_file(ENDPOINT_QUARTER, "q.yaml")
    assert_one_line_error(
        run(command, path), f"{path}:5 (runs[0].due)", "is not after release"
    )


@pytest.mark.parametrize("kind", ["training", "fine_tuning"])
def test_training_with_the_inference_method_is_refused(run, scenario_file, kind):
    path = scenario_file(
        MINIMAL.replace("kind: training", f"kind: {kind}") + "    method: inference\n"
    )
    assert_one_line_error(
        run("validate", path),
        f"{path}:8 (workloads[0].method)",
        f"method inference is for batch_inference and serving; a {kind} workload uses full",
    )


@pytest.mark.parametrize("group, count", [("[]", 0), ("[job]", 1), ("[job, job]", 1)])
@pytest.mark.parametrize("key", ["same_region", "same_provider"])
def test_a_placement_group_names_two_workloads_or_more(
    run, scenario_file, key, group, count
):
    path = scenario_file(MINIMAL + f"constraints: {{{key}: [{group}]}}\n")
    assert_one_line_error(
        run("validate", path),
        f"{path}:8 (constraints.{key}[0])",
        f"a group keeps two or more workloads together; this one names {count}",
    )


QUARTER_OF = """\
name: q
catalogs: [lambda]
horizon: {{start: {start}, end: {end}, step: {step}}}
runs:
  - name: a
    kind: training
    memory: {{per_gpu: 20GiB}}
    work: {{gpu_hours: 10, reference_gpu: A100-80GB}}
{rest}"""


@pytest.mark.parametrize(
    "start, end, step, rest, where, fragment",
    [
        # a calendar in December 9999 made `batch` compute the month after it (the year 10000)
        (
            "9999-12-01",
            "9999-12-31",
            "6h",
            "",
            "3 (horizon.start)",
            "expected a date from 1970 to 9000",
        ),
        # an offset that moves a date before the year 1 overflowed Python's dates
        (
            "'0001-01-01T00:00+14:00'",
            "0001-01-15",
            "6h",
            "",
            "3 (horizon.start)",
            "expected a date from 1970 to 9000",
        ),
        # an endpoint serves for its window; a horizon of two centuries passed every duration's bound unchecked
        (
            "2000-01-01",
            "2199-01-01",
            "4w",
            "",
            "3 (horizon)",
            "at most 1,000,000 h (114 years)",
        ),
        # a placement group naming no run reached the scenario's own check unlocated (a traceback)
        (
            "2027-01-01",
            "2027-01-15",
            "6h",
            "constraints: {same_region: [[a, nope]]}\n",
            "9 (constraints.same_region[0][1])",
            "unknown run 'nope'",
        ),
        # a reservation whose price x nodes x term passes a trillion dollars made CP-SAT refuse the model, unlocated
        (
            "2027-01-01",
            "2027-03-15",
            "6h",
            "reservations: [{name: r, offer: lambda/us-east-1/gpu_8x_h100_sxm5, start: "
            "2027-01-01, end: 2027-03-15, price_per_node_h: 1e12, max_nodes: 30}]\n",
            "9 (reservations[0])",
            "at most $1,000,000,000,000",
        ),
        # a step of 1e-300 h printed a step count of 300 digits
        (
            "2027-01-01",
            "2027-01-15",
            "1e-300h",
            "",
            "3 (horizon.step)",
            "a horizon of 3.36e+302 steps",
        ),
    ],
)
@pytest.mark.parametrize("command", ["validate", "batch"])
def test_quarter_calendars_past_their_bounds_are_one_located_line(
    run, scenario_file, command, start, end, step, rest, where, fragment
):
    path = scenario_file(
        QUARTER_OF.format(start=start, end=end, step=step, rest=rest), "q.yaml"
    )
    assert_one_line_error(run(command, path), f"{path}:{where}", fragment)


def test_a_scenario_group_naming_no_workload_is_located(run, scenario_file):
    path = scenario_file(MINIMAL + "constraints: {same_region: [[job, nope]]}\n")
    assert_one_line_error(
        run("validate", path),
        "(constraints.same_region[0][1])",
        "unknown workload 'nope'",
    )


def test_a_rule_of_the_scenario_a_quarter_breaks_is_one_located_line(
    run, scenario_file, monkeypatch
):
    """A quarter's runs are checked again as a scenario's workloads; a rule only the scenario holds is still one
    located line, at the run (here the scenario refuses every run: a stand-in for a rule the quarter lacks)."""
    import planner.load.quarter as quarter_loading
    from planner.schema.scenario import Scenario

    def strict(quarter):
        Scenario(
            name="q",
            workloads=[
                {
                    "name": "a",
                    "kind": "training",
                    "memory": {"per_gpu": 20},
                    "duration": 2e6,
                    "work": {"gpu_hours": 10, "reference_gpu": "A100-80GB"},
                }
            ],
        )

    monkeypatch.setattr(quarter_loading, "as_scenario", strict)
    path = scenario_file(
        QUARTER_OF.format(start="2027-01-01", end="2027-01-15", step="6h", rest=""),
        "q.yaml",
    )
    assert_one_line_error(
        run("validate", path), f"{path}:5 (runs[0])", "less than or equal to 1000000"
    )


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("[" * 100_000 + "]" * 100_000, "nested deeper than 64 levels"),
        ('{"a": [1' + "0" * 5000 + "]}", "an integer of thousands of digits"),
        ('{"model_type": "llama",', "not valid JSON"),
    ],
)
def test_an_hf_config_the_json_reader_refuses_is_one_located_line(
    run, scenario_file, text, fragment
):
    config = scenario_file(text, "config.json")
    path = scenario_file(
        MINIMAL.replace(
            "    memory:", f"    model: {{hf_config: {config.name}}}\n    memory:"
        ).split("    memory:")[0]
        + "    work: {tokens: 1B}\n"
    )
    assert_one_line_error(
        run("validate", path),
        "(workloads[0].model)",
        f"HF config file {config}",
        fragment,
    )


def test_a_reservation_term_with_no_whole_step_is_located(run, scenario_file):
    """Found by fuzzing: a term inside one 6-hour step was reported as ending before it began, and with
    min_nodes 1 the quarter was called infeasible, blaming a run."""
    rest = (
        "reservations: [{name: r, offer: lambda/us-east-1/gpu_8x_h100_sxm5, start: '2027-01-10T01:00', "
        "end: '2027-01-10T02:00', price_per_node_h: 10, max_nodes: 1}]\n"
    )
    path = scenario_file(
        QUARTER_OF.format(start="2027-01-01", end="2027-01-15", step="6h", rest=rest),
        "q.yaml",
    )
    assert_one_line_error(
        run("validate", path),
        f"{path}:9 (reservations[0])",
        "holds no whole step of 6.0h",
    )


def test_a_duplicate_run_name_is_located_under_runs(run, scenario_file):
    text = QUARTER_OF.format(start="2027-01-01", end="2027-01-15", step="6h", rest="")
    path = scenario_file(text + text[text.index("  - name: a") :], "q.yaml")
    assert_one_line_error(
        run("validate", path), f"{path}:9 (runs[1].name)", "duplicate run name 'a'"
    )


@pytest.mark.parametrize("step", ["1e-310h", "5e-324h", "0.0000001s"])
def test_a_billing_step_below_a_millisecond_is_refused(
    run, scenario_file, tmp_path, step
):
    """Found by fuzzing: a granule of 1e-310 h took the rounding waste's grid past floating point (NaN in the
    JSON, or an overflow)."""
    header = OFFERS_HEADER.replace(
        ",defaults,notes", ",billing_granularity_h,billing_minimum_h,defaults,notes"
    )
    (tmp_path / "mine.csv").write_text(
        f"{header}\n{A10G_ROW.replace(',,,,,', f',,,,{step},0,,')}\n"
    )
    path = scenario_file(MINIMAL.replace("catalogs: [aws]", "catalogs: [mine.csv]"))
    assert_one_line_error(
        run("validate", path), "mine.csv:2", "expected a billing step from 1 ms"
    )


def test_an_empty_gantt_name_is_refused(run):
    """`--gantt ''` drew nothing and said nothing (`whatif --plot ''` is refused)."""
    assert_one_line_error(
        run("batch", SCENARIOS / "quarter-budget.yaml", "--gantt", ""),
        "--gantt",
        "expected a .png or .html file name, got ''",
    )


ZERO_TRAFFIC_QUARTER = """\
name: zero-traffic
catalogs: [aws]
horizon: {start: 2027-01-04, end: 2027-02-01, step: 6h}
runs:
  - name: ep
    kind: serving
    model: llama-3.1-8b
    traffic:
      profile: [{hours: "0-24", requests_per_s: 0}]
      buckets: [{prompt_tokens: 1024, output_tokens: 256}]
    slo: {ttft: 800ms, tpot: 40ms}
"""


def test_a_quarter_endpoint_without_traffic_runs_no_nodes(run, scenario_file):
    """Found by fuzzing: an endpoint whose profile is zero all day made `batch` fail on an empty table of nodes
    (KeyError 'option'); as in a scenario, it serves nothing and costs nothing."""
    path = scenario_file(ZERO_TRAFFIC_QUARTER, "q.yaml")
    result = run("batch", path, "--time-limit", "5")
    assert result.exit_code == 0 and "expected total $0.00" in result.stdout, (
        result.output
    )
