"""The Textual application: owns the poller worker and routes each new view to the visible screen."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from textual import events
from textual.app import App
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widgets import Input

from gputop.actions.actor import Actor, actor_for
from gputop.actions.execute import ActionOutcome
from gputop.clock import Clock
from gputop.core.config import Config
from gputop.core.metrics import HeatScale, Metric
from gputop.core.node_actions import MAX_REASON_CHARS, NodeAction, folded_reason, reason_template
from gputop.core.safe_text import safe_block, safe_line
from gputop.core.source_problems import problems_of
from gputop.core.summary import ClusterView
from gputop.gc_tuning import freeze_after_start
from gputop.poller import Poller
from gputop.sources.base import Source
from gputop.tui import terminal_guard, themes
from gputop.tui.commands import GputopCommands
from gputop.tui.palette import Palette, PaletteCache
from gputop.tui.policy_control import PolicyControl
from gputop.tui.screens.dashboard import DashboardScreen
from gputop.tui.stopping import Stopping
from gputop.tui.strips import patch_strip_divide, patch_strip_render
from gputop.tui.typed_keys import type_into
from gputop.tui.view_release import ViewRelease
from gputop.tui.widgets.cluster_map import ClusterMap
from gputop.tui.widgets.node_table import NodeTable
from gputop.tui.widgets.status_header import StatusHeader

if TYPE_CHECKING:
    from gputop.sources.replay import ReplayClock, ReplaySource


@dataclass
class AppSettings:
    config: Config
    cluster_name: str
    sources: list[Source]
    clock: Clock
    is_demo: bool = False
    theme: str | None = None  # --theme wins over the config
    read_only: bool = False
    metric: Metric | None = None
    theme_dirs: list[object] = field(default_factory=list)  # None/empty: the packaged and user dirs
    freeze_gc: bool = True
    host_keys_unverified: bool = False  # the config turned host key checking off: the header says so
    # a replay: its source (the recording) and clock; the app is then read-only, with the time bar's keys
    replay: ReplaySource | None = None
    # --record FILE: every view also goes into a recording
    record_to: str | None = None

    @property
    def audit_log(self) -> str:
        """The audit log actions write: the config's, or the XDG default; the demo's own file apart."""
        from gputop.actions.audit import audit_log_path

        return audit_log_path(self.config.audit_log, os.environ, demo=self.is_demo)


REPLAY_KEYS = (
    ("p", "replay_toggle", "Replay: pause / play"),
    ("full_stop", "replay_step(1)", "Replay: next tick"),
    ("comma", "replay_step(-1)", "Replay: previous tick"),
    ("plus", "replay_speed(1)", "Replay: faster (up to 64x)"),
    ("minus", "replay_speed(-1)", "Replay: slower (down to 0.25x)"),
    ("n", "replay_next_event", "Replay: next problem or action"),
    ("T", "replay_jump", "Replay: jump to a time"),
)
NOTICE_MAX_CHARS = 2000
NOTICE_MAX_LINES = 12


class ViewUpdated(Message):
    def __init__(self, view: ClusterView) -> None:
        super().__init__()
        self.view = view


class GputopApp(App[None]):
    TITLE = "gputop"
    COMMANDS = App.COMMANDS | {GputopCommands}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "help", "Help"),  # first: a new user's way in, kept on a narrow footer
        Binding("q", "quit", "Quit"),
        Binding("t", "cycle_theme", "Theme", show=False),
        Binding("r", "refresh", "Refresh now"),
        Binding("ctrl+p", "command_palette", "Commands", show=False),
    ]

    def __init__(self, settings: AppSettings) -> None:
        # gputop's changes to Textual (a cycle-free Strip.divide, the control-character guard on
        # Strip.render, the terminal-safe writer) are made when an app is made, not as a side effect of
        # importing this module; each is idempotent, and all are in place before the driver starts.
        patch_strip_divide()
        patch_strip_render()
        terminal_guard.install()
        self.settings = settings
        self.clock = settings.clock
        self.read_only = settings.read_only or settings.config.read_only
        self.metric = settings.metric or Metric(settings.config.ui.metric)
        self.view: ClusterView | None = None
        self.gputop_theme_names: list[str] = []
        self.startup_warnings: list[str] = []
        self._palettes = PaletteCache()
        self._gc_frozen = False
        self._announced: frozenset[str] = frozenset()  # source problems already toasted
        super().__init__()
        self._install_themes()
        self.poller = Poller(
            cluster=settings.cluster_name,
            sources=settings.sources,
            clock=settings.clock,
            poll=settings.config.poll,
            thresholds=settings.config.thresholds,
            on_view=self._on_poller_view,
            is_demo=settings.is_demo,
            history=settings.config.history,
        )
        self.poller.cell_metric = self.metric
        # the view stage's heat scales: the map colours what the core coded, on the same scale
        self.scales: dict[Metric, HeatScale] = self.poller.stage.scales
        self.actor: Actor | None = None if self.read_only else actor_for(settings.sources)
        self.stopping = Stopping(self)
        self.policy = PolicyControl(self)
        self.poller.stage.history = self.policy.history
        self.recorder: Any = None
        self._said_bad_frames = False
        self.view_release = ViewRelease()
        if settings.replay is not None:
            self.read_only = True
            for keys, action, words in REPLAY_KEYS:
                self.bind(keys, action, description=words, show=False)

    # -- themes -----------------------------------------------------------------------------------------
    def get_theme_variable_defaults(self) -> dict[str, str]:
        # Textual's own themes lack gputop's variables; borrow the default theme's so any theme works.
        return themes.theme_variable_defaults()

    def _install_themes(self) -> None:
        dirs = self.settings.theme_dirs or themes.theme_dirs()
        loaded, warnings = themes.load_themes(dirs)  # type: ignore[arg-type]
        self.startup_warnings.extend(warnings)
        names = {t.name for t in loaded}
        if themes.DEFAULT_THEME not in names:
            loaded.insert(0, themes.builtin_fallback_theme())
        for theme in loaded:
            self.register_theme(theme)
        self.gputop_theme_names = [t.name for t in loaded]
        requested = self.settings.theme or self.settings.config.ui.theme
        available = [*self.available_themes]
        chosen, warning = themes.resolve_theme(requested, available)
        if warning:
            self.startup_warnings.append(warning)
        self.theme = chosen

    def set_theme(self, name: str) -> None:
        self.theme = name

    def action_cycle_theme(self) -> None:
        names = self.gputop_theme_names
        current = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(current + 1) % len(names)]
        self.notify(f"theme {self.theme}", timeout=2)

    def watch_theme(self, _theme: str) -> None:
        # Line-API widgets cache strips coloured by the old theme: re-render the visible screen.
        if not self.is_running or self.view is None:
            return
        apply = getattr(self.screen, "apply_view", None)
        if apply is not None:
            self.call_after_refresh(apply, self.view)

    @property
    def palette(self) -> Palette:
        return self._palettes.get(self)

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Every notice goes through here: its words often quote a node, Slurm or a command's output, so
        they are made safe for the terminal and bounded first (`gputop.core.safe_text`), and never read
        as markup (``[@click=...]`` in a job name would become a link that runs an action)."""
        del markup
        super().notify(
            safe_block(message, NOTICE_MAX_CHARS, NOTICE_MAX_LINES),
            title=safe_line(title),
            severity=severity,
            timeout=timeout,
            markup=False,
        )

    # -- life cycle -------------------------------------------------------------------------------------
    def on_mount(self) -> None:
        self.push_screen(DashboardScreen())
        for warning in self.startup_warnings:
            self.notify(warning, severity="warning", timeout=10)
        self.stopping.watch()
        if not self.read_only:
            self._warn_of_unfinished_actions()
        self.policy.start()
        if self.settings.record_to is not None:
            self._start_recording(self.settings.record_to)
        # One long-lived worker; exit_on_error=False so a poller bug shows up as an error, not a dead app.
        self.run_worker(self.poller.run(), name="poller", exit_on_error=False, group="poller")
        self.call_after_refresh(self._preload_screens)

    def on_key(self, event: events.Key) -> None:
        """Keys typed fast after ``/`` (or pasted, or sent in one packet over a slow link) are handed to
        the table before ``/`` moves the focus to the filter, and would be lost there. An input takes
        every printable key it is given, so one that reaches the app while an input has the focus was
        meant for that input: it goes there now, so that an Enter typed after it finds it there."""
        focused = self.focused
        if isinstance(focused, Input) and event.is_printable and event.character is not None:
            event.stop()
            type_into(focused, event.character)

    @staticmethod
    def _preload_screens() -> None:
        # The screens a key opens are imported where they are opened, so the first frame does not wait
        # for them (about 55 ms of imports, a sixth of the start-up); loaded here, once the first frame
        # is painted, the first key that opens one does not wait either.
        from gputop.tui.screens import alerts, help, node, node_action, queue  # noqa: F401

    def _on_poller_view(self, view: ClusterView) -> None:
        self.post_message(ViewUpdated(view))

    def on_view_updated(self, message: ViewUpdated) -> None:
        if not self.is_running:
            return  # shutting down: its screens are being taken apart, widgets first
        retired, self.view = self.view, message.view
        with self.batch_update():
            for screen in self._visible_screens():
                apply = getattr(screen, "apply_view", None)
                # A screen just pushed has no widgets until it is mounted; it shows the latest view when
                # it is. Nor is a view for a screen no longer in the DOM, or for any once the app is
                # exiting and taking its screens apart (a tick landing then found a MIG dialog without
                # its widgets).
                if apply is not None and screen.is_mounted and screen.is_attached and screen.is_running:
                    apply(message.view)
        self._announce_source_problems(message.view)
        self._announce_new_crit(message.view)
        self.policy.on_view(message.view)
        if self.recorder is not None:
            self._record(message.view)
        replay = self.settings.replay
        if replay is not None and replay.bad_frames and not self._said_bad_frames:
            self._said_bad_frames = True
            self.notify(
                f"the recording has frames that do not read: {replay.bad_frame_why}", severity="warning"
            )
        if not self._gc_frozen and self.settings.freeze_gc:
            self._gc_frozen = True
            self.call_after_refresh(self._freeze_gc)
        # every widget holds the new view now: the old one is freed a slice at a time, not in this frame
        self.view_release.retire(retired)

    def _visible_screens(self) -> list[Screen[object]]:
        """The screen on top and, under each modal one (help, the command palette, a dialog), the screen
        it is drawn over: all of them show data, and none may freeze while another is on top."""
        shown: list[Screen[object]] = []
        for screen in reversed(self.screen_stack):
            shown.append(screen)
            if not screen.is_modal:
                break
        return shown

    def _announce_source_problems(self, view: ClusterView) -> None:
        """A source that starts failing gets one toast with its whole message (the header keeps a short
        form while it lasts); one that recovers gets one too."""
        now = frozenset(f"{p.badge}: {p.text}" for p in problems_of(view))
        for problem in sorted(now - self._announced):
            self.notify(
                problem,
                severity="error",
                timeout=15,
            )
        for problem in sorted(self._announced - now):
            self.notify(
                f"recovered: {problem}",
                timeout=5,
            )
        self._announced = now

    def _announce_new_crit(self, view: ClusterView) -> None:
        """A new CRIT alert (neither acknowledged nor silenced) rings the bell and/or shows a notice, as
        configured; a dozen at once (a switch failing) make one notice, not a dozen."""
        news = view.alerts.new_crit if view.alerts is not None else ()
        if not news:
            return
        config = self.settings.config.alerts
        if config.bell:
            self.bell()
        if config.notify:
            lines = [f"{a.node}: {a.message}" for a in news[:5]]
            more = f"\n... and {len(news) - 5} more (A: alerts)" if len(news) > 5 else ""
            self.notify(
                "\n".join(lines) + more,
                title="new CRIT",
                severity="error",
                timeout=10,
            )

    @staticmethod
    def _freeze_gc() -> None:
        freeze_after_start()

    # -- actions reachable from keys and the command palette ---------------------------------------------
    def action_refresh(self) -> None:
        self.poller.refresh_now()

    def action_help(self) -> None:
        from gputop.tui.screens.alerts import AlertsScreen
        from gputop.tui.screens.help import HelpScreen
        from gputop.tui.screens.node import NodeScreen
        from gputop.tui.screens.queue import QueueScreen
        from gputop.tui.widgets.alert_table import AlertTable
        from gputop.tui.widgets.job_table import JobTable

        sections: list[tuple[str, list[BindingType]]] = [
            ("Everywhere", list(self.BINDINGS)),
            ("Dashboard", list(DashboardScreen.BINDINGS)),
            ("Cluster map", list(ClusterMap.BINDINGS)),
            ("Node table", list(NodeTable.BINDINGS)),
            ("Node screen", list(NodeScreen.BINDINGS)),
            ("Slurm queue", list(QueueScreen.BINDINGS) + list(JobTable.BINDINGS)),
            ("Alerts", list(AlertsScreen.BINDINGS) + list(AlertTable.BINDINGS)),
        ]
        acting = DashboardScreen.ACTING | NodeScreen.ACTING | QueueScreen.ACTING | AlertsScreen.ACTING
        if self.read_only:  # the acting keys are not bound, so not listed either
            sections = [
                (title, [b for b in bindings if not (isinstance(b, Binding) and b.action in acting)])
                for title, bindings in sections
            ]
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(sections))

    def status_header(self) -> StatusHeader:
        """The header every screen shows."""
        return StatusHeader(
            now=self.clock.now,
            is_demo=self.settings.is_demo,
            read_only=self.read_only,
            age_warn_s=self.settings.config.ui.refresh_age_warn_s,
            host_keys_unverified=self.settings.host_keys_unverified,
            policy_badge=lambda: self.policy.badge or self.replay_status(),
        )

    def set_metric(self, metric: Metric) -> None:
        self.metric = metric
        self.poller.cell_metric = metric
        dashboard = self._dashboard()
        if dashboard is not None:
            dashboard.show_metric(metric)

    def sort_nodes(self, column: str) -> None:
        dashboard = self._dashboard()
        if dashboard is not None:
            dashboard.query_one(NodeTable).sort_by(column)

    def start_filter(self) -> None:
        dashboard = self._dashboard()
        if dashboard is not None:
            self._return_to(dashboard)
            dashboard.action_start_filter()

    def clear_filter(self) -> None:
        dashboard = self._dashboard()
        if dashboard is not None:
            dashboard.action_clear_filter()

    def open_alerts(self) -> None:
        from gputop.tui.screens.alerts import AlertsScreen

        if isinstance(self.screen, AlertsScreen):
            return
        dashboard = self._dashboard()
        if dashboard is not None:
            self._return_to(dashboard)
        self.push_screen(AlertsScreen())

    def open_queue(self) -> None:
        from gputop.tui.screens.queue import QueueScreen

        if isinstance(self.screen, QueueScreen):
            return
        dashboard = self._dashboard()
        if dashboard is not None:
            self._return_to(dashboard)
        self.push_screen(QueueScreen())

    def open_node(self, name: str) -> None:
        from gputop.tui.screens.node import NodeScreen

        if isinstance(self.screen, NodeScreen):
            self.pop_screen()
        self.push_screen(NodeScreen(name))

    # -- actions in flight, and stopping while one runs (gputop.tui.stopping) -----------------------------
    def begin_action(self, what: str) -> int:
        return self.stopping.begin(what)

    def end_action(self, token: int) -> None:
        self.stopping.end(token)

    async def action_quit(self) -> None:
        self.stopping.request(None)

    def _warn_of_unfinished_actions(self) -> None:
        """An intent on record with no outcome: an earlier gputop died while the command ran."""
        from gputop.actions.audit import unfinished

        for record in unfinished(self.settings.audit_log)[-3:]:
            argv = " ".join(str(word) for word in record.get("argv", []))
            self.notify(
                f"an action started at {record.get('time')} by {record.get('user')} has no recorded "
                f"outcome (gputop stopped while it ran): {argv}. Check what it did.",
                severity="warning",
                timeout=30,
            )

    # -- drain and resume ---------------------------------------------------------------------------------
    def open_node_action(self, action: NodeAction, nodes: list[str], *, reason: str | None = None) -> None:
        """The drain or resume dialog for ``nodes``, its reason prefilled with ``reason``, else with one
        node's evidence."""
        if self.read_only:
            return
        if self.actor is None:
            self.notify(
                f"cannot {action}: this cluster has no Slurm to act on (slurm.enabled is false)",
                severity="error",
            )
            return
        view = self.view
        if not nodes or view is None:
            self.notify(f"nothing to {action}: select a node, or mark some with space", severity="warning")
            return
        from gputop.tui.screens.node_action import NodeActionScreen

        if reason is None:
            reason = ""
            if action == "drain":
                # each node's evidence; several nodes' folded into one reason
                reason = folded_reason(
                    {
                        name: reason_template(view.rows[name].source, view.rows[name].problems)
                        for name in nodes
                        if name in view.rows
                    }
                )
        # The evidence may quote a node or a user (an Xid line, a job name): prefilled as it is shown, so
        # what goes to Slurm holds no control character either.
        reason = safe_line(reason, MAX_REASON_CHARS)
        self.push_screen(
            NodeActionScreen(
                action,
                nodes,
                frozenset(view.rows),
                view.snapshot.slurm,
                self.actor,
                cluster=self.settings.cluster_name,
                audit_log=self.settings.audit_log,
                reason=reason,
                on_done=self._node_action_done,
                problems={name: view.rows[name].problems for name in nodes if name in view.rows},
            )
        )

    def on_unmount(self) -> None:
        self.view_release.release_now()
        self.policy.close()
        if self.recorder is not None:
            self.recorder.close()

    # -- --record FILE ------------------------------------------------------------------------------------
    def _start_recording(self, path: str) -> None:
        from gputop.headless.record import BackgroundRecorder, Recorder

        settings = self.settings
        recorder = Recorder(
            path, settings.cluster_name, settings.config.poll.interval_s, audit_log=settings.audit_log
        )
        try:
            recorder.open()
        except OSError as err:
            self.notify(f"not recording: {path}: {err.strerror or err}", severity="error", timeout=15)
            return
        self.recorder = BackgroundRecorder(recorder)
        self.notify(f"recording to {recorder.file.path}", timeout=5)

    def _record(self, view: ClusterView) -> None:
        error = self.recorder.error
        if error is not None:
            self.notify(f"recording stopped: {error.strerror or error}", severity="error", timeout=30)
            self.recorder.close()
            self.recorder = None
            return
        self.recorder.submit(view)

    # -- replay: the time bar's keys ------------------------------------------------------------------
    def _replay_clock(self) -> ReplayClock | None:
        # a replay's clock is a ReplayClock (gputop replay makes both); not imported to check: numpy
        # would load before the first frame
        return self.clock if self.settings.replay is not None else None  # type: ignore[return-value]

    def replay_status(self) -> str | None:
        """The header's time bar: where the replay is, whether it plays, and how fast."""
        clock = self._replay_clock()
        if clock is None:
            return None
        import time as _time

        at = _time.strftime("%Y-%m-%d %H:%M:%S UTC", _time.gmtime(clock.now()))
        state = "paused" if clock.paused else f"{clock.speed:g}x"
        span = max(clock.end_s - clock.start_s, 1e-9)
        done = int(10 * (clock.now() - clock.start_s) / span)
        bar = "━" * done + "●" + "─" * (10 - done)
        return f"REPLAY {at} {state} {bar}"

    def _replay_moved(self) -> None:
        self.poller.refresh_now()
        for header in self.screen.query(StatusHeader):
            header.refresh()

    def action_replay_toggle(self) -> None:
        clock = self._replay_clock()
        if clock is not None:
            clock.toggle()
            self._replay_moved()

    def action_replay_speed(self, step: int) -> None:
        clock = self._replay_clock()
        if clock is not None:
            clock.faster(step)
            self._replay_moved()

    def action_replay_step(self, step: int) -> None:
        clock, source = self._replay_clock(), self.settings.replay
        if clock is not None and source is not None:
            if not clock.paused:
                clock.toggle()
            clock.seek(source.step_time(clock.now(), step))
            self._replay_moved()

    def action_replay_next_event(self) -> None:
        clock, source = self._replay_clock(), self.settings.replay
        if clock is None or source is None:
            return
        found = source.next_event(clock.now())
        if found is None:
            self.notify("no problem or action after this point", timeout=4)
            return
        clock.seek(found)
        if not clock.paused:
            clock.toggle()
        self._replay_moved()

    def action_replay_jump(self) -> None:
        from gputop.tui.screens.replay_jump import ReplayJumpScreen

        clock = self._replay_clock()
        if clock is not None:
            self.push_screen(ReplayJumpScreen(clock), lambda _result: self._replay_moved())

    def _node_action_done(self, outcome: ActionOutcome) -> None:
        plan = outcome.plan
        self.policy.note_dialog_drain(outcome, self.view)
        if outcome.ok:
            dashboard = self._dashboard()
            if dashboard is not None:
                dashboard.clear_marks()
            self.notify(f"{plan.action} {plan.nodeset}: done", timeout=5)
        elif outcome.result == "unknown":
            self.notify(f"{plan.action} {plan.nodeset}: outcome unknown", severity="error", timeout=15)
        else:
            what = "refused" if outcome.refused else "failed"
            self.notify(
                f"{plan.action} {plan.nodeset} {what}: {outcome.output}", severity="error", timeout=15
            )
        if outcome.audit_error:
            self.notify(outcome.audit_error, severity="error", timeout=30)

    def _dashboard(self) -> DashboardScreen | None:
        for screen in self.screen_stack:
            if isinstance(screen, DashboardScreen):
                return screen
        return None

    def _return_to(self, screen: DashboardScreen) -> None:
        while self.screen is not screen and len(self.screen_stack) > 1:
            self.pop_screen()
