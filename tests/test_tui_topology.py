"""The node screen's topology pane, driven with the Pilot on nodes whose facts are real captured outputs."""

from __future__ import annotations

from rich.style import Style
from textual.pilot import Pilot
from textual.strip import Strip
from textual.widgets import DataTable

from gputop.clock import FrozenClock
from gputop.core.config import Config
from gputop.core.models import NodeSample, Severity, SourceResult
from gputop.core.parsers.topo import LinkClass
from gputop.tui.app import AppSettings, GputopApp
from gputop.tui.palette import Palette
from gputop.tui.screens.help import HelpScreen
from gputop.tui.screens.node import NodeScreen
from gputop.tui.widgets.topology_lines import LINK_HEAT_STEP, PaneStyles
from gputop.tui.widgets.topology_pane import TopologyPane
from tests.topology_samples import SAMPLED_AT_S, dgx_node, fixture, node_sample
from tests.tui_helpers import send_burst, wait_for_data

NARROW = (80, 24)
WIDE = (200, 50)


class FixedSource:
    """A source that reports the same nodes every tick."""

    name = "fixed"

    def __init__(self, nodes: list[NodeSample]) -> None:
        self.nodes = tuple(nodes)

    async def start(self) -> None:
        return None

    async def collect(self, now_s: float) -> SourceResult:
        return SourceResult(nodes=self.nodes)

    async def close(self) -> None:
        return None


def fixed_app(*nodes: NodeSample, theme: str | None = None) -> GputopApp:
    settings = AppSettings(
        config=Config.default(),
        cluster_name="fixtures",
        sources=[FixedSource(list(nodes))],
        clock=FrozenClock(SAMPLED_AT_S),
        theme=theme,
    )
    settings.freeze_gc = False
    return GputopApp(settings)


async def open_pane(pilot: Pilot[None], node: str) -> TopologyPane:
    app = pilot.app
    assert isinstance(app, GputopApp)
    await wait_for_data(pilot)
    app.open_node(node)
    await pilot.pause()
    assert isinstance(app.screen, NodeScreen)
    return app.screen.query_one(TopologyPane)


def strips(pane: TopologyPane) -> list[Strip]:
    return [pane.render_line(y) for y in range(pane.virtual_size.height)]


def row(pane: TopologyPane, label: str) -> int:
    """The line of the matrix row labelled ``label`` (after its one-character mark)."""
    lines = pane.text_lines()
    return next(y for y, text in enumerate(lines) if text[1:].split(" ", 1)[0] == label)


def cell(pane: TopologyPane, row_label: str, column_label: str) -> tuple[str, Style]:
    """Text and style of a matrix cell, found under its column's header in the row's block."""
    lines = pane.text_lines()
    y = row(pane, row_label)
    header = max(
        h for h in range(y) if f" {column_label} " in lines[h] and lines[h][1:4].strip() in ("", "NIC")
    )
    x = lines[header].index(f" {column_label} ") + 1
    position = 0
    for segment in pane.render_line(y):
        if position <= x < position + segment.cell_length:
            return segment.text.strip(), segment.style or Style()
        position += segment.cell_length
    raise AssertionError(f"no cell at {row_label}/{column_label}")


def bg(style: Style) -> object:
    return style.bgcolor


def link_bg(palette: Palette, link: LinkClass) -> object:
    return palette.heat_bg[LINK_HEAT_STEP[link]].bgcolor


async def test_eight_gpus_and_eight_nics_fit_80_columns_whole() -> None:
    app = fixed_app(dgx_node())
    async with app.run_test(size=NARROW) as pilot:
        pane = await open_pane(pilot, "dgx01")
        assert pane.size.width <= 80
        lines = pane.text_lines()
        for i in range(8):
            gpu_line = lines[row(pane, f"G{i}")]
            # the last column is whole: nothing was cut at the pane's edge
            assert gpu_line.endswith("18/18 x 26.6"), gpu_line
            nic_line = lines[row(pane, f"N{i}")]
            assert (
                nic_line.split()[1]
                == ("mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11")[i]
            )
            assert nic_line.endswith("Active  400"), nic_line
        nic_header = next(text for text in lines if text.startswith(" NIC name"))
        assert nic_header.split()[2:10] == [f"G{i}" for i in range(8)]
        assert all(strip.cell_length <= 80 for strip in strips(pane))


async def test_cells_say_the_link_as_nvidia_smi_prints_it_coloured_by_class() -> None:
    app = fixed_app(
        dgx_node(),
        node_sample("a100", topology=fixture("nvidia-smi-topo", "a100")),
        node_sample("rtx", topology=fixture("nvidia-smi-topo", "rtx5090"), gpus=2),
    )
    async with app.run_test(size=NARROW) as pilot:
        pane = await open_pane(pilot, "dgx01")
        palette = app.palette
        text, style = cell(pane, "G0", "G1")
        assert text == "NV18" and bg(style) == link_bg(palette, LinkClass.NVLINK)
        text, style = cell(pane, "G3", "G3")
        assert text == "X" and style.color == palette.dim.color
        expected = {
            "G0": ("PIX", LinkClass.PIX),
            "G1": ("NODE", LinkClass.NODE),
            "G4": ("SYS", LinkClass.SYS),
        }
        for gpu, (word, link) in expected.items():
            text, style = cell(pane, "N0", gpu)
            assert text == word and bg(style) == link_bg(palette, link), gpu
        app.open_node("a100")
        await pilot.pause()
        pane = app.screen.query_one(TopologyPane)
        text, style = cell(pane, "N1", "G2")
        assert text == "PXB" and bg(style) == link_bg(palette, LinkClass.PXB)
        text, style = cell(pane, "G0", "G7")
        assert text == "NV12" and bg(style) == link_bg(palette, LinkClass.NVLINK)
        app.open_node("rtx")
        await pilot.pause()
        pane = app.screen.query_one(TopologyPane)
        text, style = cell(pane, "G0", "G1")
        assert text == "PHB" and bg(style) == link_bg(palette, LinkClass.PHB)
        legend = [text for text in pane.text_lines() if text.startswith("NV# NVLink")]
        assert legend, pane.text_lines()


async def test_nics_carry_their_mlx5_names_port_states_and_rates() -> None:
    # This matrix names mlx5_0-mlx5_7, so two of the sample's Down Ethernet ports land on NICs.
    node = dgx_node("dgx02", nic_names=[f"mlx5_{k}" for k in range(8)])
    app = fixed_app(node)
    async with app.run_test(size=NARROW) as pilot:
        pane = await open_pane(pilot, "dgx02")
        lines = pane.text_lines()
        n2 = lines[row(pane, "N2")]
        assert n2.split()[1] == "mlx5_2" and n2.split()[-3:] == ["Down/Disabled", "40", "Eth"], n2
        state = next(s for s in pane.render_line(row(pane, "N2")) if s.text.startswith("Down/Disabled"))
        assert state.style is not None and state.style.color == app.palette.severity[Severity.CRIT].color
        n0 = lines[row(pane, "N0")]
        assert n0.split()[-3:] == ["Active", "400", "IB"], n0
        # CAs the matrix does not list still show, in natural order
        title = lines.index("IB ports on CAs the matrix does not list")
        assert [line.split()[0] for line in lines[title + 2 : title + 6]] == [
            "mlx5_8",
            "mlx5_9",
            "mlx5_10",
            "mlx5_11",
        ]


async def test_selecting_a_gpu_marks_its_row_its_nearest_nic_and_its_nvlink_peers() -> None:
    v100 = node_sample(
        "v100",
        topology=fixture("nvidia-smi-topo", "v100"),
        nvlink_s=fixture("nvidia-smi-nvlink", "v100-sxm2-32gb-7gpu"),
    )
    app = fixed_app(dgx_node(), v100)
    async with app.run_test(size=NARROW) as pilot:
        pane = await open_pane(pilot, "dgx01")
        await pilot.press("i")
        assert app.focused is pane
        await pilot.press("down", "down", "down", "down", "down")
        assert pane.selected_gpu == 5
        lines = pane.text_lines()
        g5 = row(pane, "G5")
        assert lines[g5].startswith("\u25b6G5")
        label = list(pane.render_line(g5))[1]
        assert label.style == app.palette.cursor
        assert lines[row(pane, "N5")].startswith("\u25b6N5")  # NIC5 shares GPU5's PCIe switch
        assert not lines[row(pane, "N4")].startswith("\u25b6")
        assert all(lines[row(pane, f"G{i}")].startswith("\u2022") for i in range(8) if i != 5)
        detail = next(text for text in lines if text.startswith("G5: "))
        assert "nearest NIC N5 mlx5_9 (PIX) port 1 Active 400 Gb/s" in " ".join(lines[lines.index(detail) :])
        # the GPU table follows the pane, and the pane follows the table
        table = app.screen.query_one("#gpus", DataTable)
        assert table.cursor_row == 5
        await pilot.press("i", "up", "up")
        assert app.focused is table and pane.selected_gpu == 3

        app.open_node("v100")
        await pilot.pause()
        pane = app.screen.query_one(TopologyPane)
        table = app.screen.query_one("#gpus", DataTable)
        table.move_cursor(row=5)
        await pilot.pause()
        lines = pane.text_lines()
        peers = [i for i in range(8) if lines[row(pane, f"G{i}")].startswith("\u2022")]
        assert peers == [1, 4, 6, 7]  # the hybrid cube mesh
        detail = " ".join(lines[row(pane, "G7") + 1 :])
        assert "NVLinks 4/6 active x 25.8 GB/s to G1 G4 G6 G7" in detail
        nvlink = next(s for s in pane.render_line(row(pane, "G3")) if s.text.strip().startswith("4/6"))
        assert nvlink.style is not None and nvlink.style.color == app.palette.severity[Severity.WARN].color


async def test_keys_typed_in_one_burst_after_i_move_the_pane() -> None:
    """``ijj`` arriving in one read: the ``j`` keys were handed to the GPU table before ``i`` moved the
    focus; they must meet the pane's bindings, not the table's."""
    app = fixed_app(dgx_node())
    async with app.run_test(size=NARROW) as pilot:
        pane = await open_pane(pilot, "dgx01")
        send_burst(app, "ijj")
        await pilot.pause(0.2)
        await pilot.pause()
        assert app.focused is pane
        assert pane.selected_gpu == 2


async def test_eighteen_nics_become_eighteen_rows() -> None:
    a100 = node_sample("a100", topology=fixture("nvidia-smi-topo", "a100"))
    app = fixed_app(a100)
    async with app.run_test(size=NARROW) as pilot:
        pane = await open_pane(pilot, "a100")
        lines = pane.text_lines()
        for k in range(18):
            words = lines[row(pane, f"N{k}")].split()
            assert words[1] == f"mlx5_{k}" and len(words[2:10]) == 8 and set(words[2:10]) <= {"SYS", "PXB"}
        assert all(strip.cell_length <= 80 for strip in strips(pane))
        assert lines[row(pane, "N5")].startswith("\u25b6")  # G0's nearest: the first of its four PXB NICs
        assert any("`ibstat`: no IB ports yet" in text for text in lines)


async def test_wide_terminal_puts_the_nic_block_beside_the_gpu_block() -> None:
    app = fixed_app(dgx_node())
    async with app.run_test(size=WIDE) as pilot:
        pane = await open_pane(pilot, "dgx01")
        lines = pane.text_lines()
        g0 = lines[row(pane, "G0")]
        assert "18/18 x 26.6" in g0 and "\u25b6N0  mlx5_0  PIX" in g0
        assert not any(text[1:].startswith("N0 ") for text in lines)


async def test_missing_facts_are_named_never_an_empty_pane() -> None:
    broken = node_sample(
        "gpu009",
        fact_errors={
            "topology": "nvidia-smi: command timed out after 20 s",
            "ibstat": "ibstat not installed",
        },
    )
    silent = node_sample("gpu010")
    app = fixed_app(broken, silent)
    async with app.run_test(size=NARROW) as pilot:
        pane = await open_pane(pilot, "gpu009")
        text = "\n".join(pane.text_lines())
        assert "`nvidia-smi topo -m` failed: nvidia-smi: command timed out after 20 s" in text
        assert "`ibstat` failed: ibstat not installed" in text
        assert "`nvidia-smi nvlink -s`: no output yet" in text
        await pilot.press("right_square_bracket")
        await pilot.pause()
        text = "\n".join(app.screen.query_one(TopologyPane).text_lines())
        assert "`nvidia-smi topo -m`: no output yet" in text


async def test_a_vm_consumer_cards_and_a_board_without_nics_all_render() -> None:
    nodes = [
        node_sample("vm", topology=fixture("nvidia-smi-topo", "h200-single"), nvlink_s="", gpus=1),
        node_sample("rtx3090", topology=fixture("nvidia-smi-topo", "rtx3090"), nvlink_s="", gpus=2),
        node_sample("rtx5090", topology=fixture("nvidia-smi-topo", "rtx5090"), nvlink_s="", gpus=2),
        node_sample(
            "gb200",
            topology=fixture("nvidia-smi-topo", "gb200"),
            nvlink_s=fixture("nvidia-smi-nvlink", "gb200"),
            gpus=4,
        ),
    ]
    app = fixed_app(*nodes)
    async with app.run_test(size=NARROW) as pilot:
        pane = await open_pane(pilot, "vm")
        for node in nodes:
            app.open_node(node.name)
            await pilot.pause()
            pane = app.screen.query_one(TopologyPane)
            lines = pane.text_lines()
            assert all(lines[row(pane, f"G{i}")] for i in range(len(node.gpus))), node.name
            assert "no NICs in the matrix" in lines[row(pane, "G0") - 1], node.name
            assert any(text.startswith("G0: ") for text in lines), node.name
        lines = pane.text_lines()  # gb200: NV18 all-to-all, two Grace sockets, NVLink elided after GPU1
        assert lines[row(pane, "G0")].endswith("18/18 x 53.1")
        assert lines[row(pane, "G2")].endswith("n/a")


async def test_help_lists_the_topology_key_and_themes_tell_link_classes_apart() -> None:
    app = fixed_app(dgx_node())
    async with app.run_test(size=WIDE) as pilot:
        await open_pane(pilot, "dgx01")
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert "Topology: select a GPU" in app.export_screenshot().replace("&#160;", " ")
        for theme in app.gputop_theme_names:
            app.theme = theme
            styles = PaneStyles.of(Palette.from_app(app))
            colours = {styles.links[link].bgcolor for link in LINK_HEAT_STEP}
            assert len(colours) == len(LINK_HEAT_STEP), theme
