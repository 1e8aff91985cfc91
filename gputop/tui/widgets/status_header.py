"""The header line: which cluster, how many nodes answer, how busy and hot it is, how old the data is."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.widget import Widget

from gputop.core.health import format_age
from gputop.core.models import Severity
from gputop.core.safe_text import safe_line
from gputop.core.source_problems import problems_of
from gputop.core.summary import ClusterView
from gputop.tui import format as fmt
from gputop.tui.palette import PaletteCache


class StatusHeader(Widget):
    DEFAULT_CSS = """
    StatusHeader { height: 1; dock: top; background: $panel; }
    """

    def __init__(
        self,
        *,
        now: Callable[[], float],
        is_demo: bool,
        read_only: bool,
        age_warn_s: float,
        host_keys_unverified: bool = False,
        policy_badge: Callable[[], str | None] = lambda: None,
        **kwargs: object,
    ) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._now = now
        self.is_demo = is_demo
        self.read_only = read_only
        self.age_warn_s = age_warn_s
        self.host_keys_unverified = host_keys_unverified
        self.policy_badge = policy_badge  # the auto-drain policy's state, None while it is off
        self._view: ClusterView | None = None
        self._palettes = PaletteCache()

    def on_mount(self) -> None:
        # The data age must tick even when no new data arrives: that is when it matters.
        self.set_interval(1.0, self.refresh)

    def apply_view(self, view: ClusterView) -> None:
        self._view = view
        self.refresh()

    def render(self) -> Text:
        palette = self._palettes.get(self.app)
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(" gputop ", palette.header)
        if self.is_demo:
            text.append(" DEMO ", palette.badge_demo)
            text.append(" ")
        if self.read_only:
            text.append(" READ-ONLY ", palette.badge_readonly)
            text.append(" ")
        if self.host_keys_unverified:
            text.append(" HOST KEYS NOT VERIFIED ", palette.severity_badge[Severity.CRIT])
            text.append(" ")
        policy = self.policy_badge()
        if policy is not None:
            style = palette.severity_badge[Severity.CRIT if "BREAKER" in policy else Severity.WARN]
            text.append(f" {policy} ", style)
            text.append(" ")
        view = self._view
        if view is None:
            text.append(" waiting for the first data...", palette.dim)
            return text
        s = view.summary
        # Narrow terminals get the short forms, so the alert count and data age never fall off the end.
        short = self.size.width < 150
        sep = (" " if short else "  ", palette.dim)
        text.append(f" {safe_line(view.snapshot.cluster)}", palette.text + palette.selection)
        text.append(*sep)
        text.append("" if short else "nodes ", palette.dim)
        text.append(f"{s.nodes_ok} ok", palette.severity[Severity.OK])
        if s.nodes_stale:
            text.append(f" {s.nodes_stale} stale", palette.severity[Severity.WARN])
        if s.nodes_down:
            text.append(f" {s.nodes_down} down", palette.severity[Severity.CRIT])
        text.append(*sep)
        if short:
            text.append(f"{s.gpu_count} GPUs", palette.text)
        else:
            text.append("GPUs ", palette.dim)
            text.append(str(s.gpu_count), palette.text)
        text.append(*sep)
        text.append("util " if not short else "", palette.dim)
        text.append(fmt.pct(s.util_mean_pct), palette.text)
        text.append(*sep)
        text.append("power " if not short else "", palette.dim)
        text.append(fmt.power(s.power_w), palette.text)
        text.append(*sep)
        text.append("alerts " if not short else "", palette.dim)
        if s.alerts_crit:
            text.append(f" {s.alerts_crit} crit ", palette.severity_badge[Severity.CRIT])
            text.append(" ")
        if s.alerts_warn:
            text.append(f" {s.alerts_warn} warn ", palette.severity_badge[Severity.WARN])
        if not (s.alerts_crit or s.alerts_warn):
            text.append("no alerts", palette.severity[Severity.OK])
        text.append(*sep)
        age_s = max(0.0, self._now() - view.snapshot.taken_at_s)
        age_style = palette.severity[Severity.WARN] if age_s >= self.age_warn_s else palette.dim
        text.append(f"{format_age(age_s)} old" if short else f"data {format_age(age_s)} old", age_style)
        # Last: a failing source. Its last good data stays on screen, so say so, and how old Slurm's is.
        now_s = self._now()
        for problem in problems_of(view):
            text.append(*sep)
            text.append(f" {problem.badge} ", palette.severity_badge[Severity.CRIT])
            text.append(f" {safe_line(problem.text)}", palette.severity[Severity.CRIT])
            if problem.kept_since_s is not None:
                kept_age_s = max(0.0, now_s - problem.kept_since_s)
                text.append(f" (showing its state of {format_age(kept_age_s)} ago)", palette.dim)
        return text
