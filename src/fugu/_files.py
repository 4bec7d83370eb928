"""Writing files so that a reader never sees half of one (ledgers, releases).

>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "x.txt"
>>> atomic_write(p, lambda fh: fh.write(b"done"))
>>> p.read_bytes()
b'done'
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

__all__ = ["atomic_write"]


def atomic_write(
    path: Path,
    write: Callable[[IO[bytes]], Any],
    *,
    error: Callable[[str], Exception] = OSError,
) -> None:
    """Call ``write(fh)`` on a temporary file in ``path``'s folder, fsync it, rename it over
    ``path`` (keeping an existing file's mode) and fsync the folder.

    An interrupted write leaves the old file (or none), never a truncated one. ``error(message)``
    builds the exception raised when the temporary file cannot be created.
    """
    folder = path.parent if str(path.parent) else Path(".")
    tmp = folder / f".{path.name}.{secrets.token_hex(8)}.tmp"
    try:
        mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else None
        # O_EXCL on a random name; 0o666 filtered by the umask, as a plain open() would, and
        # never more open than the file replaced (readable by others while being written)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if mode is None else mode)
    except OSError as exc:
        raise error(f"cannot write {str(path)!r}: {exc}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:  # make the rename itself durable (best effort: not every platform can open a folder)
        dfd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)
