"""The policy's webhook: one JSON POST per decision, in gputop's own format or Alertmanager's.

aiohttp, as the HTTP client the Prometheus source uses too: a session with a connection pool and a
total timeout per request. A webhook that fails (refused, slow, an error status) is said on stderr or
in the UI and never holds back a decision: the audit log is the record, the webhook a notice.

Alertmanager's webhook format is its version 4 (``alerts[]`` with labels, annotations, ``startsAt``): a
drain or any decision that leaves a problem standing is ``firing``; a resume is ``resolved``.
"""

from __future__ import annotations

import hashlib
import socket
import time
from collections.abc import Mapping
from typing import Any

from gputop.core.config import PolicyConfig
from gputop.core.drain_policy import Decision

USER_AGENT = "gputop-policy"


def _iso(time_s: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time_s))


def json_body(cluster: str, decision: Decision, outcome: Mapping[str, Any] | None) -> dict[str, Any]:
    return {
        "source": "gputop",
        "kind": "policy-decision",
        "cluster": cluster,
        "host": socket.gethostname(),
        "time": _iso(decision.time_s),
        "decision": decision.to_record(),
        "outcome": dict(outcome) if outcome is not None else None,
    }


def alertmanager_body(cluster: str, decision: Decision, outcome: Mapping[str, Any] | None) -> dict[str, Any]:
    resolved = decision.verdict in ("resume", "release")
    labels = {
        "alertname": "GputopPolicyDecision",
        "cluster": cluster,
        "node": decision.node,
        "decision": decision.verdict,
        "cause": decision.cause,
        "dry_run": "true" if decision.dry_run else "false",
        "severity": decision.severity or "info",
    }
    annotations = {
        "summary": f"gputop policy: {decision.verdict} {decision.node}"
        + (" (dry run)" if decision.dry_run else ""),
        "description": decision.why,
    }
    if decision.reason:
        annotations["reason"] = decision.reason
    if decision.problem:
        annotations["problem"] = decision.problem
    if outcome is not None:
        annotations["outcome"] = str(outcome.get("result"))
    fingerprint = hashlib.sha256(f"{cluster}/{decision.node}/{decision.cause}".encode()).hexdigest()[:16]
    alert = {
        "status": "resolved" if resolved else "firing",
        "labels": labels,
        "annotations": annotations,
        "startsAt": _iso(decision.time_s),
        "endsAt": _iso(decision.time_s) if resolved else "0001-01-01T00:00:00Z",
        "generatorURL": "",
        "fingerprint": fingerprint,
    }
    group = {"cluster": cluster, "node": decision.node}
    return {
        "version": "4",
        "groupKey": f'{{}}:{{cluster="{cluster}",node="{decision.node}"}}',
        "truncatedAlerts": 0,
        "status": alert["status"],
        "receiver": "gputop",
        "groupLabels": group,
        "commonLabels": labels,
        "commonAnnotations": annotations,
        "externalURL": "",
        "alerts": [alert],
    }


def shown_url(url: str) -> str:
    """The URL as messages show it: without a user, password or query, where tokens hide."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(the configured URL)"
    return f"{parts.scheme}://{host}{port}{parts.path}"


class Webhook:
    def __init__(self, url: str, *, cluster: str, alertmanager: bool, timeout_s: float) -> None:
        self.url = url
        self.shown = shown_url(url)
        self.cluster = cluster
        self.alertmanager = alertmanager
        self.timeout_s = timeout_s
        self._session: Any = None

    def body(self, decision: Decision, outcome: Mapping[str, Any] | None) -> dict[str, Any]:
        make = alertmanager_body if self.alertmanager else json_body
        return make(self.cluster, decision, outcome)

    async def send(self, decision: Decision, outcome: Mapping[str, Any] | None) -> str | None:
        """Posts one decision; None when the receiver took it (2xx), else why not."""
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.timeout_s), headers={"User-Agent": USER_AGENT}
            )
        try:
            async with self._session.post(self.url, json=self.body(decision, outcome)) as response:
                if 200 <= response.status < 300:
                    return None
                return f"webhook {self.shown} answered HTTP {response.status}"
        except TimeoutError:
            return f"webhook {self.shown}: no answer within {self.timeout_s:g}s"
        except aiohttp.ClientError as err:
            return f"webhook {self.shown}: {err.__class__.__name__}"

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def webhook_for(config: PolicyConfig, cluster: str) -> Webhook | None:
    """The policy config's webhook, or None where it names none."""
    if config.webhook_url is None:
        return None
    return Webhook(
        config.webhook_url,
        cluster=cluster,
        alertmanager=config.webhook_format == "alertmanager",
        timeout_s=config.webhook_timeout_s,
    )
