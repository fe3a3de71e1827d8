"""Fetching a model's `config.json` from the Hugging Face Hub by its `org/name` id.

Split from `hf_config` so that the network side (huggingface_hub, its cache, the reachability
probe and the reasons a download fails) sits apart from reading and counting a config.

    fetch_config(repo_id, revision)  config.json of a Hub repository, through huggingface_hub's cache
    looks_like_hf_id(value)          "org/name"?
"""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path
from urllib.parse import urlparse

from planner.load.hf_config import load_config_file

_LOCAL_HINT = "give a local file instead: model: {hf_config: path/to/config.json}"


_ID_PART = r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?"
_HF_ID = re.compile(rf"^{_ID_PART}/{_ID_PART}$")


def looks_like_hf_id(value: str) -> bool:
    """An "org/name" Hub model id (huggingface_hub's repo-id rules: letters, digits, - _ .,
    no '--' or '..', at most 96 characters), and not a file name such as configs/x.json."""
    if not isinstance(value, str) or len(value) > 96 or not _HF_ID.match(value):
        return False
    if "--" in value or ".." in value:
        return False
    return not value.lower().endswith(
        (".git", ".json", ".yaml", ".yml", ".csv", ".toml", ".txt")
    )


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().upper() in ("1", "ON", "YES", "TRUE")


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if lines else type(exc).__name__
    return text if len(text) <= 160 else text[:157] + "..."


_CONNECTION_ERRORS = (
    "ConnectionError",
    "ConnectTimeout",
    "ReadTimeout",
    "Timeout",
    "TimeoutException",
    "ConnectError",
    "NetworkError",
    "TransportError",
    "ProxyError",
    "SSLError",
)


def _why_not_fetched(
    exc: BaseException, offline: bool, revision: str | None
) -> str | None:
    """The reason a download failed, in a few words; None for errors that are not about fetching
    (a bug should surface as itself)."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    if "GatedRepoError" in names:
        return (
            "the repository is gated: accept its terms on huggingface.co and log in "
            "(`huggingface-cli login` or HF_TOKEN)"
        )
    if "RevisionNotFoundError" in names:
        return f"revision {revision!r} not found"
    if "RepositoryNotFoundError" in names:
        return "no such repository on the Hub (or it is private: log in with `huggingface-cli login` or HF_TOKEN)"
    if names & {"LocalEntryNotFoundError", "OfflineModeIsEnabled"}:
        if offline:
            return "HF_HUB_OFFLINE is set and it is not in the local Hugging Face cache"
        return (
            "the Hub could not be reached and it is not in the local Hugging Face cache"
        )
    if "EntryNotFoundError" in names:
        return "the repository has no config.json"
    if names & set(_CONNECTION_ERRORS):
        return f"the Hub could not be reached ({_first_line(exc)})"
    if "HfHubHTTPError" in names:
        return f"the Hub answered with an error ({_first_line(exc)})"
    if isinstance(exc, OSError):
        return _first_line(exc)
    return None


HUB_PROBE_S = 2.0
"""How long a connection to the Hub may take before the cache is read alone."""


def _hub_reachable() -> bool:
    """Whether the Hub (HF_ENDPOINT, default huggingface.co) takes a connection within HUB_PROBE_S: with no
    network, huggingface_hub retries for half a minute before it gives up, so the cache is then read at once."""
    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    try:
        socket.create_connection(
            (url.hostname or "", url.port or (443 if url.scheme == "https" else 80)),
            timeout=HUB_PROBE_S,
        ).close()
    except OSError:
        return False
    return True


def fetch_config(repo_id: str, revision: str | None = None) -> dict:
    """config.json of a Hub model repository, downloaded through huggingface_hub (which caches it;
    with HF_HUB_OFFLINE set, or the Hub out of reach, only the cache is read)."""
    if not looks_like_hf_id(repo_id):
        raise ValueError(f"{repo_id!r} is not a Hugging Face model id (org/name)")
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise ValueError(
            f"cannot fetch the config of {repo_id!r}: huggingface_hub is not installed; "
            f"`pip install huggingface_hub`, or {_LOCAL_HINT}"
        ) from None
    offline = _env_true("HF_HUB_OFFLINE")
    kwargs: dict = {"revision": revision}
    if offline or not _hub_reachable():
        kwargs["local_files_only"] = True
    try:
        path = hf_hub_download(repo_id, "config.json", **kwargs)
    except Exception as exc:
        reason = _why_not_fetched(exc, offline, revision)
        if reason is None:
            raise
        at = f" at revision {revision!r}" if revision else ""
        raise ValueError(
            f"could not fetch config.json of {repo_id!r}{at}: {reason}; "
            f"download it by hand and {_LOCAL_HINT}"
        ) from exc
    return load_config_file(Path(path))
