"""Run tokens: one short string that names a run completely, so it can be shared and replayed byte for byte.

A token is ``me1-`` followed by base64url (no padding) of four bytes of CRC-32 and the raw-deflate compression of a
canonical JSON object (sorted keys, no spaces). The CRC-32 is taken over that JSON, so a token damaged in transit
(a character changed, dropped or cut off) is refused rather than replayed as another run. The prefix names the
token format: a later format gets a new prefix, and this module refuses prefixes it does not know.

The JSON holds everything :func:`milvus_edu.simulate` takes that changes the run folder's bytes, and nothing that
does not (where the files are written, whether a second process writes them, progress reporting):

* ``version``: the milvus-edu version that made the run. The model is only byte-deterministic within one version,
  so another version refuses the token and names the version to install.
* ``scenario``, ``seed``, ``duration_s`` (as given: ``5`` and ``5.0`` are recorded differently in the run log).
* ``switches``: the bug switches on, sorted.
* ``options``: the scenario options that differ from the scenario's defaults.
* ``params``: the Milvus parameters (``group.name``) that differ from Milvus's defaults.
* ``network``: the fields of the latency model that differ from its defaults (omitted when none do).
* ``run_id``: only when it differs from the default ``<scenario>-s<seed>+<switch>...``.
* ``jsonl``: only when ``False`` (the run folder then holds no ``events.jsonl``).
* ``interventions``: what the run changes part-way (the explorer's "fork here", :func:`milvus_edu.fork`): a list of
  :mod:`milvus_edu.sim.interventions` in their dict form (``{"kind": "kill", "node": "proxy-1", "t_ms": 2000.0}``),
  sorted by time, equal times in the order they are applied; omitted when empty. :func:`decode` refuses a kind
  it does not know (the version check already refuses another version's token).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import zlib
from dataclasses import dataclass, field, fields

PREFIX = "me1-"
_BASE64URL = re.compile(r"[A-Za-z0-9_-]*")


class TokenError(ValueError):
    """A token that cannot be replayed here: damaged, of another format or version, or naming what does not exist.

    The message is one line saying what is wrong and how to fix it.
    """


@dataclass(frozen=True)
class RunSpec:
    """What a token holds: the arguments of :func:`milvus_edu.simulate` that decide the run folder's bytes."""

    version: str
    scenario: str
    seed: int
    duration_s: float
    switches: tuple[str, ...] = ()
    options: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)
    network: dict = field(default_factory=dict)
    run_id: str | None = None
    jsonl: bool = True
    interventions: tuple = ()

    def to_dict(self) -> dict:
        """The canonical JSON-ready form: defaults left out, so equal runs give equal tokens."""
        out = {"version": self.version, "scenario": self.scenario, "seed": self.seed, "duration_s": self.duration_s,
               "switches": sorted(self.switches)}
        for name in ("options", "params", "network"):
            if getattr(self, name):
                out[name] = getattr(self, name)
        if self.run_id is not None:
            out["run_id"] = self.run_id
        if not self.jsonl:
            out["jsonl"] = False
        if self.interventions:
            out["interventions"] = list(self.interventions)
        return out

    def simulate_kwargs(self) -> dict:
        """Keyword arguments for :func:`milvus_edu.simulate` (without ``out_dir``) that make this run again;
        ``network``, when the run changed it, is a dict of ``NetworkParams`` fields (the caller builds the object)."""
        kwargs = {"seed": self.seed, "duration_s": self.duration_s, "switches": list(self.switches),
                  "options": dict(self.options), "params": dict(self.params), "jsonl": self.jsonl}
        if self.network:
            kwargs["network"] = dict(self.network)  # the NetworkParams fields that differ from their defaults
        if self.run_id is not None:
            kwargs["run_id"] = self.run_id
        if self.interventions:
            kwargs["interventions"] = [dict(i) for i in self.interventions]  # simulate takes the dict forms too
        return kwargs


def encode(spec: RunSpec) -> str:
    """The token of ``spec``: ``me1-`` and base64url of CRC-32 + raw deflate of its canonical JSON."""
    text = json.dumps(spec.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    body = zlib.crc32(text).to_bytes(4, "big") + packer.compress(text) + packer.flush()
    return PREFIX + base64.urlsafe_b64encode(body).decode("ascii").rstrip("=")


def decode(token: str, *, check_version: bool = True) -> RunSpec:
    """The :class:`RunSpec` a token holds; :class:`TokenError` (one line: what is wrong, how to fix it) otherwise.

    With ``check_version`` (the default) a token made by another milvus-edu version is refused, because another
    version's model may run the same scenario differently.
    """
    from ..version import __version__

    if not isinstance(token, str):
        raise TokenError(f"a run token is a string starting with {PREFIX!r}, got {type(token).__name__}")
    token = token.strip()
    if not token.startswith(PREFIX):
        head = token.split("-", 1)[0] if "-" in token else token[:8]
        if head.startswith("me") and head[2:].isdigit():
            raise TokenError(f"this token has format {head!r}, which this milvus-edu ({__version__}) does not read; "
                             f"replay it with the milvus-edu version that made it")
        raise TokenError(f"not a milvus-edu run token (it must start with {PREFIX!r}); copy the whole token that "
                         "`milvus-edu simulate` printed or summary.json's \"token\"")
    data = token[len(PREFIX):]
    damaged = "the token is damaged ({}); copy it again, whole, from `milvus-edu simulate`'s output or summary.json"
    # the decoder skips characters outside the alphabet: refuse them here, or a mangled token could decode
    if not _BASE64URL.fullmatch(data):
        raise TokenError(damaged.format("it holds characters that are not base64url"))
    try:
        body = base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))
    except (binascii.Error, ValueError):  # 4k+1 characters: one too many, or three too few, cannot tell which
        raise TokenError(damaged.format("it has a length no token has: a character was added to it or some were "
                                        "lost")) from None
    if len(body) < 6:
        raise TokenError(damaged.format("too short: truncated"))
    unpacker = zlib.decompressobj(-15)
    try:
        text = unpacker.decompress(body[4:]) + unpacker.flush()
    except zlib.error:
        raise TokenError(damaged.format("its compressed part does not decompress: characters were added, lost or changed")) from None
    # where a character was added or lost cannot be told from what the decoder sees (one lost mid-token often reads
    # as data past the end): each message says what it saw and every edit that can cause it
    if not unpacker.eof:
        raise TokenError(damaged.format("its compressed part stops short: characters were lost from it, or added or changed"))
    if unpacker.unused_data:
        raise TokenError(damaged.format("its compressed part goes on past its end: characters were added to it, or lost or changed"))
    if zlib.crc32(text) != int.from_bytes(body[:4], "big"):
        raise TokenError(damaged.format("its checksum does not match: characters were changed, added or lost"))
    try:
        raw = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise TokenError(damaged.format("its content is not JSON")) from None
    known = {f.name for f in fields(RunSpec)}
    if not isinstance(raw, dict) or not {"version", "scenario", "seed", "duration_s"} <= set(raw) \
            or not set(raw) <= known:
        raise TokenError(damaged.format("its content is not a run's description"))
    if check_version and raw["version"] != __version__:
        raise TokenError(f"this token was made by milvus-edu {raw['version']}, this is {__version__}: another version "
                         f"may run it differently; replay it with `pip install milvus-edu=={raw['version']}`")
    raw["switches"] = tuple(raw.get("switches", ()))
    raw["interventions"] = _interventions(raw.get("interventions", []), damaged)
    return RunSpec(**raw)


def _interventions(items, damaged: str) -> tuple:
    """A token's interventions, checked and in canonical form (dicts, sorted by time)."""
    from .interventions import canonical

    if not isinstance(items, list):
        raise TokenError(damaged.format("its interventions are not a list"))
    try:
        return tuple(i.to_dict() for i in canonical(items))
    except (TypeError, ValueError):
        raise TokenError(damaged.format("one of its interventions is not one this milvus-edu knows")) from None


def spec_of_run(scenario, seed, duration_s, switches, options, config, network, run_id, jsonl,
                interventions=()) -> RunSpec:
    """The :class:`RunSpec` of a run :func:`milvus_edu.simulate` validated: defaults dropped, values typed
    (``network`` is the run's ``NetworkParams``, compared field by field with a default one).

    ``options`` are the scenario's options after defaults were applied, ``config`` the run's
    :class:`~milvus_edu.config.Config`, ``run_id`` the id the run uses (left out when it is the default one),
    ``interventions`` the run's interventions, sorted by time (:func:`milvus_edu.sim.interventions.canonical`).
    """
    from ..version import __version__
    from ..registry import get_scenario
    spec = get_scenario(scenario)
    changed_options = {k: (list(v) if isinstance(v, tuple) else v) for k, v in options.items()
                       if spec.options.get(k) != v}
    params = config.changed_params()
    changed_net = {f.name: getattr(network, f.name) for f in fields(network)
                   if getattr(network, f.name) != getattr(type(network)(), f.name)}
    default_id = f"{scenario}-s{seed}" + "".join(f"+{n}" for n in switches)
    return RunSpec(version=__version__, scenario=scenario, seed=seed, duration_s=duration_s,
                   switches=tuple(sorted(switches)), options=changed_options, params=params, network=changed_net,
                   run_id=None if run_id == default_id else run_id, jsonl=jsonl,
                   interventions=tuple(i.to_dict() for i in interventions))
