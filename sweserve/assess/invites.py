"""One-time invites: a link with a random token that expires, stored only as its SHA-256.

The store (`<state-dir>/assess/invites.json`) never holds a token: whoever reads it cannot open a session. A
token is redeemed once (`redeem`), under a file lock, so two tabs racing on one link get one session; a used,
expired or unknown token is refused with why (`Refused.why` is a sentence a page can show).
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import os
import secrets
import threading
from datetime import datetime, timedelta
from pathlib import Path

from pydantic import Field

from sweserve.loading import load_model, write_atomic
from sweserve.models import Strict, now


class Refused(Exception):
    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()


class Invite(Strict):
    invite_id: str
    candidate: str = Field(pattern=r"^[A-Za-z0-9_-]+$")
    pack: str = Field(description="the pack file's path")
    pack_version: str
    token_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    created_at: datetime
    expires_at: datetime
    used_at: datetime | None = None


class InviteBook(Strict):
    invites: list[Invite] = Field(default_factory=list)


class InviteStore:
    def __init__(self, path: Path):
        self.path = path
        # the book parsed last, by the identity of the file it was read from (device, inode, size, times), with its
        # invites by token hash: a look at a link is a stat and a lookup while the file is unchanged, never a parse
        # of every invite ever made (red team 22c, R22c-1: ~10 ms of the GIL per GET /i at 2,000 invites, for
        # anyone with no link at all); every write replaces the file (`write_atomic`), so the next look reads it
        self._cache: tuple[tuple[int, ...], dict[str, Invite]] | None = None
        self._cache_lock = threading.Lock()

    def _locked(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = open(self.path.with_name(self.path.name + ".lock"), "w")  # noqa: SIM115 - closed by caller
        fcntl.flock(lock, fcntl.LOCK_EX)
        return lock

    def _read(self) -> InviteBook:
        if not self.path.exists():
            return InviteBook()
        return load_model(self.path, InviteBook, what="invites file")

    def _indexed(self) -> dict[str, Invite]:
        """The invites by token hash, as the file holds them now (parsed again only when it changed)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return {}
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        with self._cache_lock:
            if self._cache is not None and self._cache[0] == key:
                return self._cache[1]
        book = self._read()
        try:  # the file read may be a newer one than the stat saw: kept only if it is still the one stat'ed
            st = os.stat(self.path)
        except FileNotFoundError:
            return {}
        if (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns) != key:
            return {inv.token_sha256: inv for inv in book.invites}
        index = {inv.token_sha256: inv for inv in book.invites}
        with self._cache_lock:
            self._cache = (key, index)
        return index

    def _write(self, book: InviteBook) -> None:
        write_atomic(self.path, book.model_dump_json(indent=1) + "\n", mode=0o600)

    def all(self) -> list[Invite]:
        return self._read().invites

    def create(self, candidate: str, pack: str, pack_version: str, valid_for: timedelta) -> tuple[Invite, str]:
        """A new invite and its token (shown once, never stored)."""
        token = secrets.token_urlsafe(32)
        t = now()
        invite = Invite(invite_id=secrets.token_hex(6), candidate=candidate, pack=pack, pack_version=pack_version,
                        token_sha256=token_hash(token), created_at=t, expires_at=t + valid_for)
        lock = self._locked()
        try:
            book = self._read()
            book.invites.append(invite)
            self._write(book)
        finally:
            lock.close()
        return invite, token

    def peek(self, token: str) -> Invite:
        """The invite of `token` if it could be redeemed now (nothing changes); Refused otherwise. No lock: the
        file is only ever replaced whole, and `redeem` checks again under it."""
        # a lookup by hash, not compared in constant time: its timing says nothing of a token but its SHA-256
        match = self._indexed().get(token_hash(token))
        return self._valid(match.model_copy() if match is not None else None)

    def redeem(self, token: str) -> Invite:
        """The invite of `token`, now marked used; Refused if unknown, used or expired."""
        lock = self._locked()
        try:
            book = self._read()
            match = self._check(book, token)
            match.used_at = now()
            self._write(book)
            return match
        finally:
            lock.close()

    @classmethod
    def _check(cls, book: InviteBook, token: str) -> Invite:
        digest = token_hash(token)
        match = None
        for inv in book.invites:  # compared in constant time, every entry
            if hmac.compare_digest(inv.token_sha256, digest):
                match = inv
        return cls._valid(match)

    @staticmethod
    def _valid(match: Invite | None) -> Invite:
        if match is None:
            raise Refused("This invitation link is not valid. Check that you copied the whole link.")
        if match.used_at is not None:
            raise Refused("This invitation link has already been used. Each link opens one assessment once; "
                          "if your session was interrupted, reopen it in the browser you started it in, or "
                          "ask the hiring team for a new link.")
        if now() >= match.expires_at:
            raise Refused("This invitation link has expired. Ask the hiring team for a new one.")
        return match


def parse_duration(text: str) -> timedelta:
    """'90m', '72h', '3d', '45s' → timedelta; ValueError otherwise."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    text = text.strip()
    if len(text) < 2 or text[-1] not in units or not text[:-1].isdigit() or int(text[:-1]) <= 0:
        raise ValueError(f"{text!r}: a duration is a positive number and s, m, h or d (e.g. 72h)")
    return timedelta(seconds=int(text[:-1]) * units[text[-1]])
