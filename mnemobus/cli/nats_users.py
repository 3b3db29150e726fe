"""`mnemobus nats-users --out DIR`: one NATS user per role, for a nats-server that enforces who publishes where.

Writes `DIR/authorization.conf` (include it from the server's config) and `DIR/<role>.env` per role with the
`MNEMOBUS_NATS__USER` / `MNEMOBUS_NATS__PASSWORD` that role's processes start with; every file is readable by its
owner only. Run it again to rotate every password.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mnemobus.bus.permissions import ROLES, generated_passwords, nats_authorization
from mnemobus.shared.subjects import inbox_root
from mnemobus.shared.config import Settings
from mnemobus.kernel.hooks import hookimpl
from mnemobus.shared.private_files import write_private


@hookimpl
def mnemobus_commands(subcommands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = subcommands.add_parser("nats-users", help="write per-role NATS users and permissions (nats-server "
                                                  "authorization block and one env file per role)")
    p.add_argument("--out", required=True, type=Path, help="directory to write into (created, files 0600)")
    p.add_argument("--roles", nargs="+", choices=list(ROLES), default=list(ROLES), help="roles to write (default: all)")
    p.set_defaults(handler=handle)


def write_users(out: Path, roles: list[str]) -> dict[str, str]:
    """The files for `roles`; returns the passwords written."""
    out.mkdir(parents=True, exist_ok=True)
    passwords = generated_passwords(roles)
    write_private(out / "authorization.conf", nats_authorization(passwords))
    for role, password in passwords.items():
        inbox = f"{inbox_root(role)}.>"
        hint = (f"# replies come only to {inbox}: connect with that inbox prefix (mnemobus does; nats-py "
                "inbox_prefix, nats CLI --inbox-prefix)\n" if inbox in ROLES[role].subscribe else "")
        write_private(out / f"{role}.env", f"# {ROLES[role].about}\n{hint}MNEMOBUS_NATS__USER={role}\n"
                                           f"MNEMOBUS_NATS__PASSWORD={password}\n"
                                           "MNEMOBUS_NATS__PERMISSIONS_ENFORCED=true\n")
    return passwords


def handle(settings: Settings, args: argparse.Namespace) -> int:
    write_users(args.out, args.roles)
    print(f"wrote {args.out / 'authorization.conf'} and {len(args.roles)} env file(s) "
          f"({', '.join(f'{r}.env' for r in args.roles)}); include the first from nats-server's config:\n"
          f"    include \"{(args.out / 'authorization.conf').resolve()}\"")
    return 0
