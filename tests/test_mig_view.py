"""What the node screen shows of MIG, and the layout composer, on real listings (fixtures/PROVENANCE.md):
the ThetaGPU A100 split in two 3g.20gb, with its old-style MIG UUIDs that name their GPU instance."""

from __future__ import annotations

from pathlib import Path

from textual.app import App, ComposeResult

from gputop.core.mig_compose import Room, add_profile, fitting_presets, room_next_to
from gputop.core.mig_layout import MigLayout, mig_gpu, parse_layout
from gputop.core.mig_view import mig_node_view
from gputop.core.models import GpuSample, NodeSample, Reachability
from gputop.core.parsers.gpu_list import GpuList, parse_gpu_list
from gputop.core.parsers.mig import parse_lci, parse_lgi, parse_lgip, parse_lgipp
from gputop.tui.widgets.mig_pane import MigPane
from tests.factories import UNKNOWN_READINGS, facts_of, gpu_sample

FIXTURES = Path(__file__).parent / "fixtures"
MODEL = "NVIDIA A100-SXM4-40GB"


def _read(path: str) -> str:
    return (FIXTURES / path).read_text(encoding="utf-8")


def facts() -> dict[str, object]:
    listed = parse_gpu_list(_read("nvidia-smi-L/a100-sxm4-40gb-thetagpu-mig-old-MIG-GPU-uuid-format.txt"))
    assert isinstance(listed, GpuList)
    return {
        "mig_gip": parse_lgip(_read("nvidia-smi-mig/lgip/a100-sxm4-40gb-thetagpu-drv460era-all-0-free.txt")),
        "mig_gipp": parse_lgipp(_read("nvidia-smi-mig/lgipp/a100-sxm4-40gb-thetagpu.txt")),
        "mig_gi": parse_lgi(_read("nvidia-smi-mig/lgi/a100-sxm4-40gb-thetagpu-2x3g.20gb.txt")),
        "mig_ci": parse_lci(_read("nvidia-smi-mig/lci/a100-sxm4-40gb-thetagpu-2x1c.3g.20gb.txt")),
        "gpu_list": listed,
    }


def gpu(index: int, mig: bool | None) -> GpuSample:
    return gpu_sample(index, name=MODEL, mig_enabled=mig, **UNKNOWN_READINGS)


def node(mig: bool | None = True, errors: dict[str, str] | None = None, **changed: object) -> NodeSample:
    given = {k: v for k, v in (facts() | changed).items() if v is not None}
    return NodeSample(
        "theta05", Reachability.OK, 1.0, (gpu(0, mig), gpu(1, False)), facts=facts_of(given, errors)
    )


def test_a_mig_gpu_shows_its_instances_by_placement_with_their_compute_instances_and_devices() -> None:
    view = mig_node_view(node())
    assert view.shown and view.missing == () and view.notes == ()
    (shown,) = view.gpus  # GPU 1 has MIG off and no instances: not shown
    assert (shown.index, shown.model, shown.grid_slices) == (0, MODEL, 8)
    assert [(i.gi_id, i.profile, str(i.placement)) for i in shown.instances] == [
        (2, "3g.20gb", "0:4"),
        (1, "3g.20gb", "4:4"),
    ]
    assert shown.owners == (2, 2, 2, 2, 1, 1, 1, 1) and shown.free_slices == ()
    assert [ci.name for ci in shown.instances[0].compute] == ["MIG 1c.3g.20gb"]
    # The old UUIDs name their GPU instance: each device sits with its own instance.
    assert [d.uuid[-4:] for d in shown.instances[0].devices] == ["/2/0"]
    assert [d.device_id for d in shown.devices] == ["0:0", "0:1"]
    assert [(r.profile, r.free, r.total) for r in shown.profiles][:2] == [("1g.5gb", 0, 7), ("2g.10gb", 0, 3)]


def test_free_slices_are_those_no_instance_covers() -> None:
    lgi = parse_lgi(_read("nvidia-smi-mig/lgi/a100-sxm4-40gb-thetagpu-2x3g.20gb.txt").replace("4:4", "4:2"))
    (shown,) = mig_node_view(node(mig_gi=lgi)).gpus
    assert shown.owners == (2, 2, 2, 2, 1, 1, None, None) and shown.free_slices == (6, 7)


def test_a_missing_listing_is_named_with_its_command_and_why() -> None:
    view = mig_node_view(node(errors={"mig_gipp": "timed out after 10 s"}, mig_gipp=None, mig_ci=None))
    assert view.missing == (
        ("nvidia-smi mig -lci", "not read yet"),
        ("nvidia-smi mig -lgipp", "timed out after 10 s"),
    )
    (shown,) = view.gpus
    assert shown.grid_slices is None and shown.owners == ()
    assert all(not i.compute for i in shown.instances)


def test_a_node_without_mig_shows_nothing() -> None:
    assert not mig_node_view(node(mig=False, mig_gi=parse_lgi("No GPU instances found\n"))).shown


# --- the composer --------------------------------------------------------------------------------------


def theta_gpu() -> object:
    f = facts()
    return mig_gpu("theta05", 0, MODEL, f["mig_gip"], f["mig_gipp"], f["mig_gi"], f["mig_ci"])  # type: ignore[arg-type]


def test_only_presets_that_fit_the_model_are_offered() -> None:
    presets = ("7x1g.10gb", "7x1g.5gb", "3x2g.10gb+1x1g.5gb", "8x1g.5gb", "1x7g.40gb", "nonsense")
    assert fitting_presets(presets, theta_gpu()) == ("7x1g.5gb", "3x2g.10gb+1x1g.5gb", "1x7g.40gb")  # type: ignore[arg-type]


def test_room_counts_what_still_fits_beside_the_layout_written_so_far() -> None:
    layout = parse_layout("1x3g.20gb")
    assert isinstance(layout, MigLayout)
    rooms = room_next_to(layout, theta_gpu())  # type: ignore[arg-type]
    assert rooms == (
        Room("1g.5gb", 4),
        Room("2g.10gb", 2),
        Room("3g.20gb", 1),
        Room("4g.20gb", 1),  # 4g at 0:4 beside 3g at 4:4
        Room("7g.40gb", 0),
    )
    assert room_next_to(MigLayout(()), theta_gpu())[0] == Room("1g.5gb", 7)  # type: ignore[arg-type]


def test_adding_a_profile_merges_counts_and_keeps_what_was_typed() -> None:
    assert add_profile("", "3g.20gb") == "1x3g.20gb"
    assert add_profile("2x1g.5gb", "1g.5gb") == "3x1g.5gb"
    assert add_profile("1x3g.20gb", "1g.5gb") == "1x3g.20gb, 1x1g.5gb"
    assert add_profile("3 x", "1g.5gb") == "3 x, 1g.5gb"


# --- the pane ------------------------------------------------------------------------------------------


class PaneApp(App[None]):
    def __init__(self, sample: NodeSample) -> None:
        super().__init__()
        self.sample = sample

    def compose(self) -> ComposeResult:
        yield MigPane()

    def on_mount(self) -> None:
        self.query_one(MigPane).show(self.sample)


async def test_the_pane_draws_the_slice_bar_and_lists_instances_and_devices() -> None:
    app = PaneApp(node())
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        lines = app.query_one(MigPane).text_lines()
    assert lines[0] == "MIG"
    assert lines[1] == "  GPU 0  A100-SXM4-40GB: 2 GPU instances, 0 of 8 slices free"
    bar = lines[2]
    assert bar.count("\u258f") == 2 and "GI 2 3g.20gb" in bar and "GI 1 3g.20gb" in bar
    assert bar.index("GI 2") < bar.index("GI 1"), "the bar follows the placement grid"
    assert lines[3].split() == [str(i) for i in range(8)]
    assert lines[4].split() == [
        "GI",
        "2",
        "3g.20gb",
        "at",
        "0:4",
        "CI",
        "0",
        "1c.3g.20gb",
        lines[4].split()[-1],
    ]
    assert lines[4].endswith("/2/0")
    assert any(line.strip().startswith("MIG devices: 0:0 1c.3g.20gb") for line in lines)


async def test_the_pane_says_which_listing_is_missing_and_hides_on_a_node_without_mig() -> None:
    app = PaneApp(node(errors={"mig_gipp": "timed out after 10 s"}, mig_gipp=None))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        pane = app.query_one(MigPane)
        lines = pane.text_lines()
        assert "  nvidia-smi mig -lgipp: timed out after 10 s" in lines
        assert "  slice grid unknown until nvidia-smi mig -lgipp is read" in lines
        pane.show(node(mig=False, mig_gi=parse_lgi("No GPU instances found\n")))
        await pilot.pause()
        assert not pane.display or pane.has_class("-empty")
