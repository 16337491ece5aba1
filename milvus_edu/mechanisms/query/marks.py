"""How the query mechanism's events are marked across the stepper's lanes."""

from __future__ import annotations

from ...registry import Mark


def _read_label(row, detail):
    if row.get("error") is not None:
        return f"#{row['request']} failed"
    pks = detail.get("pks") or []
    shown = ",".join(str(p) for p in pks[:3]) + ("…" if len(pks) > 3 else "")
    return f"#{row['request']} {row.get('level') or ''}: {shown or '∅'}"


MARKS = {
    "client.read": Mark("tab:green", "-", _read_label),
    "querynode.load": Mark("tab:brown", "--", lambda row, d: f"load seg {row.get('segment')}"),
}
