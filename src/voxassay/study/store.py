"""The study store: one SQLite file per study (WAL journal, ``synchronous=FULL``).

Tables: ``meta`` (admin token hash, study id), ``raters`` (token hash, profile, headphone
result), ``sessions`` (each time a rater opens the invite link), ``assignments`` (rater x
item, position in the rater's order, side flip for pairs; ``id`` is the opaque task id used
in URLs), ``ratings`` (the current score per rater x item x eval, with its revision number)
and ``rating_history`` (every submitted revision), ``headphone_checks`` (every attempt).
A write is acknowledged only after its transaction committed; with WAL and FULL sync the
commit is on disk, so it survives a SIGKILL of the server (and a power cut).

:func:`export_ratings_csv` writes the long format the analysis reads.
"""

from __future__ import annotations

import csv
import datetime as _dt
import hashlib
import hmac
import json
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from voxassay.study.format import DB_FILE, RATING_COLUMNS, Study, load_study

SCHEMA_VERSION = "1"

EXPORT_COLUMNS = list(RATING_COLUMNS)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS raters (
  id TEXT PRIMARY KEY,
  token_hash TEXT,
  source TEXT NOT NULL DEFAULT 'invite',
  created_at TEXT NOT NULL,
  profile TEXT,
  profile_at TEXT,
  headphone_passed INTEGER,
  started_at TEXT,
  last_seen TEXT
);
CREATE TABLE IF NOT EXISTS sessions (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  rater TEXT NOT NULL REFERENCES raters(id),
  started_at TEXT NOT NULL,
  user_agent TEXT
);
CREATE TABLE IF NOT EXISTS assignments (
  id TEXT PRIMARY KEY,
  rater TEXT NOT NULL REFERENCES raters(id),
  item TEXT NOT NULL,
  position INTEGER NOT NULL,
  flip INTEGER NOT NULL DEFAULT 0,
  UNIQUE (rater, item),
  UNIQUE (rater, position)
);
CREATE TABLE IF NOT EXISTS ratings (
  rater TEXT NOT NULL,
  item TEXT NOT NULL,
  eval TEXT NOT NULL,
  score REAL NOT NULL,
  revision INTEGER NOT NULL DEFAULT 0,
  timestamp TEXT NOT NULL,
  response_ms INTEGER,
  source TEXT NOT NULL DEFAULT 'web',
  PRIMARY KEY (rater, item, eval)
);
CREATE TABLE IF NOT EXISTS rating_history (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  rater TEXT NOT NULL,
  item TEXT NOT NULL,
  eval TEXT NOT NULL,
  score REAL NOT NULL,
  revision INTEGER NOT NULL,
  timestamp TEXT NOT NULL,
  response_ms INTEGER,
  source TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS headphone_checks (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  rater TEXT NOT NULL REFERENCES raters(id),
  attempt INTEGER NOT NULL,
  correct INTEGER NOT NULL,
  total INTEGER NOT NULL,
  passed INTEGER NOT NULL,
  timestamp TEXT NOT NULL
);
"""


class RatingConflict(Exception):
    """A rating for this rater x item x eval exists and the submit was not a revision."""


class RatingMissing(Exception):
    """A revision of a rating that does not exist."""


def utc_now() -> str:
    """ISO 8601 UTC with milliseconds and a ``Z``."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def hash_secret(secret: str) -> str:
    """SHA-256 hex of a token's secret part (tokens have >= 144 random bits: no salt needed)."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def split_token(token: str) -> tuple[str, str] | None:
    """``<id>.<secret>`` -> (id, secret); None for anything else."""
    if not isinstance(token, str) or len(token) > 200 or token.count(".") != 1:
        return None
    ident, secret = token.split(".")
    if not ident or not secret:
        return None
    return ident, secret


def token_matches(secret: str, stored_hash: str | None) -> bool:
    """Constant-time comparison of the secret's hash with the stored hash."""
    if not stored_hash:
        return False
    return hmac.compare_digest(hash_secret(secret), stored_hash)


def connect(path: Path, *, readonly: bool = False) -> sqlite3.Connection:
    """A connection in autocommit mode (explicit BEGIN/COMMIT), WAL, FULL sync."""
    if readonly:
        conn = sqlite3.connect(
            f"file:{path}?mode=ro", uri=True, isolation_level=None, check_same_thread=False
        )
    else:
        conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA busy_timeout=10000")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


@dataclass
class RatingWrite:
    """One eval's answer for one rater x item."""

    eval: str
    score: float


class StudyStore:
    """Thin, typed access to a study's SQLite file. Not thread-safe: one per thread."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = Path(path)
        self.conn = connect(self.path, readonly=readonly)
        if not readonly:
            self.conn.executescript(_SCHEMA)
            self.conn.execute(
                "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)",
                (SCHEMA_VERSION,),
            )

    @classmethod
    def for_study(cls, study_dir: Path, *, readonly: bool = False) -> StudyStore:
        return cls(Path(study_dir) / DB_FILE, readonly=readonly)

    def close(self) -> None:
        self.conn.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on error); committed = on disk."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    # --- meta and raters -------------------------------------------------------------

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    def meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def add_rater(self, rater: str, token_hash: str | None, source: str = "invite") -> None:
        self.conn.execute(
            "INSERT INTO raters(id, token_hash, source, created_at) VALUES (?, ?, ?, ?)",
            (rater, token_hash, source, utc_now()),
        )

    def ensure_rater(self, rater: str, source: str) -> bool:
        """Add a rater without a token (imported ratings); True when it was new."""
        cur = self.conn.execute(
            "INSERT OR IGNORE INTO raters(id, token_hash, source, created_at) VALUES (?, NULL, ?, ?)",
            (rater, source, utc_now()),
        )
        return cur.rowcount > 0

    def rater_hashes(self) -> dict[str, str]:
        rows = self.conn.execute("SELECT id, token_hash FROM raters WHERE token_hash IS NOT NULL")
        return {str(r[0]): str(r[1]) for r in rows}

    def raters(self) -> list[dict[str, Any]]:
        cur = self.conn.execute(
            "SELECT id, source, created_at, profile, headphone_passed, started_at, last_seen "
            "FROM raters ORDER BY id"
        )
        out = []
        for r in cur:
            out.append(
                {
                    "id": r[0],
                    "source": r[1],
                    "created_at": r[2],
                    "profile": json.loads(r[3]) if r[3] else None,
                    "headphone_passed": None if r[4] is None else bool(r[4]),
                    "started_at": r[5],
                    "last_seen": r[6],
                }
            )
        return out

    def set_profile(self, rater: str, profile: Mapping[str, str], now: str) -> None:
        self.conn.execute(
            "UPDATE raters SET profile = ?, profile_at = ? WHERE id = ?",
            (json.dumps(dict(profile), sort_keys=True), now, rater),
        )

    def add_headphone_check(
        self, rater: str, attempt: int, correct: int, total: int, passed: bool, now: str
    ) -> None:
        self.conn.execute(
            "INSERT INTO headphone_checks(rater, attempt, correct, total, passed, timestamp) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (rater, attempt, correct, total, int(passed), now),
        )
        self.conn.execute(
            "UPDATE raters SET headphone_passed = ? WHERE id = ?", (int(passed), rater)
        )

    def headphone_attempts(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        cur = self.conn.execute(
            "SELECT rater, attempt, correct, total, passed, timestamp FROM headphone_checks "
            "ORDER BY id"
        )
        for r in cur:
            out.setdefault(str(r[0]), []).append(
                {
                    "attempt": r[1],
                    "correct": r[2],
                    "total": r[3],
                    "passed": bool(r[4]),
                    "timestamp": r[5],
                }
            )
        return out

    def add_session(self, rater: str, user_agent: str | None, now: str) -> None:
        self.conn.execute(
            "INSERT INTO sessions(rater, started_at, user_agent) VALUES (?, ?, ?)",
            (rater, now, (user_agent or "")[:300]),
        )
        self.conn.execute(
            "UPDATE raters SET started_at = COALESCE(started_at, ?), last_seen = ? WHERE id = ?",
            (now, now, rater),
        )

    # --- assignments -----------------------------------------------------------------

    def add_assignment(self, aid: str, rater: str, item: str, position: int, flip: int) -> None:
        self.conn.execute(
            "INSERT INTO assignments(id, rater, item, position, flip) VALUES (?, ?, ?, ?, ?)",
            (aid, rater, item, position, flip),
        )

    def assignments(self) -> list[tuple[str, str, str, int, int]]:
        """(id, rater, item, position, flip) ordered by rater and position."""
        cur = self.conn.execute(
            "SELECT id, rater, item, position, flip FROM assignments ORDER BY rater, position"
        )
        return [(str(a), str(b), str(c), int(d), int(e)) for a, b, c, d, e in cur]

    # --- ratings ---------------------------------------------------------------------

    def write_ratings(
        self,
        rater: str,
        item: str,
        answers: list[RatingWrite],
        *,
        now: str,
        response_ms: int | None,
        source: str = "web",
        revise: bool = False,
    ) -> int:
        """Store one rater x item's answers inside the caller's transaction.

        Without ``revise`` every answer must be new (else :class:`RatingConflict`); with it
        every answer must exist (else :class:`RatingMissing`) and gets revision + 1. Every
        write is also appended to ``rating_history``. Returns the revision written.
        """
        revision = 0
        for a in answers:
            if revise:
                row = self.conn.execute(
                    "SELECT revision FROM ratings WHERE rater = ? AND item = ? AND eval = ?",
                    (rater, item, a.eval),
                ).fetchone()
                if row is None:
                    raise RatingMissing(f"no rating of {a.eval!r} to revise")
                revision = max(revision, int(row[0]) + 1)
                self.conn.execute(
                    "UPDATE ratings SET score = ?, revision = ?, timestamp = ?, "
                    "response_ms = COALESCE(?, response_ms), source = ? "
                    "WHERE rater = ? AND item = ? AND eval = ?",
                    (a.score, int(row[0]) + 1, now, response_ms, source, rater, item, a.eval),
                )
                rev = int(row[0]) + 1
            else:
                try:
                    self.conn.execute(
                        "INSERT INTO ratings(rater, item, eval, score, revision, timestamp, "
                        "response_ms, source) VALUES (?, ?, ?, ?, 0, ?, ?, ?)",
                        (rater, item, a.eval, a.score, now, response_ms, source),
                    )
                except sqlite3.IntegrityError:
                    raise RatingConflict(
                        f"{a.eval!r} of this item is already rated (submit a revision)"
                    ) from None
                rev = 0
            self.conn.execute(
                "INSERT INTO rating_history(rater, item, eval, score, revision, timestamp, "
                "response_ms, source) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (rater, item, a.eval, a.score, rev, now, response_ms, source),
            )
        self.conn.execute("UPDATE raters SET last_seen = ? WHERE id = ?", (now, rater))
        return revision

    def existing_score(self, rater: str, item: str, ev: str) -> float | None:
        row = self.conn.execute(
            "SELECT score FROM ratings WHERE rater = ? AND item = ? AND eval = ?",
            (rater, item, ev),
        ).fetchone()
        return None if row is None else float(row[0])

    def rated(self) -> dict[str, dict[str, set[str]]]:
        """rater -> item -> set of rated eval ids."""
        out: dict[str, dict[str, set[str]]] = {}
        for rater, item, ev in self.conn.execute("SELECT rater, item, eval FROM ratings"):
            out.setdefault(str(rater), {}).setdefault(str(item), set()).add(str(ev))
        return out

    def ratings(self) -> list[dict[str, Any]]:
        """Current ratings, oldest first."""
        cur = self.conn.execute(
            "SELECT rater, item, eval, score, revision, timestamp, response_ms, source "
            "FROM ratings ORDER BY timestamp, rater, item, eval"
        )
        keys = ("rater", "item", "eval", "score", "revision", "timestamp", "response_ms", "source")
        return [dict(zip(keys, row, strict=True)) for row in cur]

    def count_ratings(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM ratings").fetchone()[0])

    def history_count(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM rating_history").fetchone()[0])


def format_score(score: float) -> str:
    """``4`` for whole numbers, else the shortest float text (``0.5``)."""
    return str(int(score)) if float(score).is_integer() else repr(float(score))


def export_rows(study: Study, ratings: list[dict[str, Any]]) -> Iterator[dict[str, str]]:
    """The long-format rows (see :data:`EXPORT_COLUMNS`) of ``ratings``."""
    items = study.item_by_id()
    evals = study.eval_by_id()
    for r in ratings:
        item = items.get(r["item"])
        ev = evals.get(r["eval"])
        if item is None or ev is None:
            continue
        expected = (item.gold or {}).get(ev.id)
        yield {
            "rater": r["rater"],
            "item": item.id,
            "system": item.system,
            "eval": ev.id,
            "score": format_score(r["score"]),
            "timestamp": r["timestamp"],
            "response_ms": "" if r["response_ms"] is None else str(r["response_ms"]),
            "gold_expected": "" if expected is None else format_score(expected),
            "dimension": ev.dimension,
            "kind": ev.kind,
            "system_b": item.system_b or "",
        }


def write_export_to(study: Study, ratings: list[dict[str, Any]], fh: IO[str]) -> int:
    """Write the CSV to an open text file; returns the number of data rows."""
    n = 0
    writer = csv.DictWriter(fh, fieldnames=EXPORT_COLUMNS)
    writer.writeheader()
    for row in export_rows(study, ratings):
        writer.writerow(row)
        n += 1
    return n


def write_export(study: Study, ratings: list[dict[str, Any]], dest: Path) -> int:
    """Write the CSV to ``dest``; returns the number of data rows."""
    Path(dest).parent.mkdir(parents=True, exist_ok=True)
    with open(dest, "w", encoding="utf-8", newline="") as fh:
        return write_export_to(study, ratings, fh)


def export_ratings_csv(study_dir: Path, dest: Path) -> int:
    """Write every current rating of the study at ``study_dir`` to ``dest`` (long format).

    Columns: ``rater,item,system,eval,score,timestamp,response_ms,gold_expected,dimension,
    kind,system_b``. Pairwise rows: ``system`` is A, ``system_b`` is B, score 1 = A
    preferred, 0 = B, 0.5 = no preference. ``gold_expected`` is blank unless the item is a
    gold or trap item with an expectation for that eval. Returns the number of rows.
    """
    study = load_study(study_dir)
    store = StudyStore.for_study(study_dir, readonly=True)
    try:
        ratings = store.ratings()
    finally:
        store.close()
    return write_export(study, ratings, dest)


def subjective_preferences(study_dir: Path) -> dict[str, Any]:
    """Pairwise ratings of a study as the duplex report's ``subjective.json`` document.

    One preference per rating of a pair item that is not a trap: ``a``/``b`` the systems,
    ``winner`` ``a``/``b``/``tie``, ``sessions`` when the stimuli came from duplex sessions.
    Write it into a duplex run folder to fill that run's subjective group.
    """
    study = load_study(study_dir)
    store = StudyStore.for_study(study_dir, readonly=True)
    try:
        ratings = store.ratings()
    finally:
        store.close()
    items = study.item_by_id()
    evals = study.eval_by_id()
    prefs = []
    for r in ratings:
        item, ev = items.get(r["item"]), evals.get(r["eval"])
        if item is None or ev is None or item.kind != "pair" or item.trap or item.gold:
            continue
        winner = {1.0: "a", 0.0: "b"}.get(float(r["score"]), "tie")
        pref: dict[str, Any] = {
            "a": item.stimuli[0].system,
            "b": item.stimuli[1].system,
            "winner": winner,
            "rater": r["rater"],
            "eval": ev.id,
        }
        sessions = [s.session for s in item.stimuli]
        if all(sessions):
            pref["sessions"] = sessions
        prefs.append(pref)
    return {"study": study.study_id, "preferences": prefs}
