"""Secured local brokers: TLS material, SCRAM users, the authorizer and ACLs, generated per run.

`eosconnect kafka start --security sasl_ssl|sasl_plaintext|ssl` turns the launcher's brokers into
what a production cluster looks like: clients authenticate (SCRAM-SHA-512 or a TLS client
certificate), connections are encrypted where the protocol says so, and `StandardAuthorizer` with
`allow.everyone.if.no.acl.found=false` refuses whatever no ACL grants. Everything is generated into
the run directory (a CA, the broker's certificate, passwords) so nothing is shared between runs.

Principals are the same in every mode: `User:admin` (the super user whose client settings the CLI
prints), `User:broker` (inter-broker, super) and `User:controller` (the KRaft controller listener,
SASL PLAIN, super). In `ssl` mode a certificate's CN becomes the principal name (a mapping rule), so
`create_user("worker")` means `User:worker` in all three modes.
"""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from eosconnect.storage.acls import Acl

SecurityMode = Literal["plaintext", "sasl_plaintext", "sasl_ssl", "ssl"]
SECURITY_MODES: tuple[SecurityMode, ...] = ("plaintext", "sasl_plaintext", "sasl_ssl", "ssl")
SUPER_USER = "admin"
BROKER_USER = "broker"
CONTROLLER_USER = "controller"
SCRAM_MECHANISM = "SCRAM-SHA-512"
#: The client listener's name in server.properties; `listener.name.client.*` settings refer to it.
CLIENT_LISTENER = "CLIENT"
CERT_DAYS = "7"


class SecurityError(RuntimeError):
    """TLS material or a user could not be made; the message says which command failed."""


def _openssl(*args: str) -> None:
    result = subprocess.run(["openssl", *args], capture_output=True, text=True, check=False, timeout=60)
    if result.returncode != 0:
        raise SecurityError(f"openssl {' '.join(args[:2])} failed: {result.stderr.strip()}")


@dataclass
class SecurityState:
    """What a secured cluster's run directory holds; saved in cluster.json (mode 0600)."""

    mode: SecurityMode = "plaintext"
    tls_dir: str = ""
    admin_password: str = ""
    controller_password: str = ""

    @property
    def enabled(self) -> bool:
        return self.mode != "plaintext"

    @property
    def sasl(self) -> bool:
        return self.mode.startswith("sasl_")

    @property
    def tls(self) -> bool:
        return self.mode in ("sasl_ssl", "ssl")

    @property
    def protocol(self) -> str:
        return self.mode.upper()

    @property
    def ca_file(self) -> Path:
        return Path(self.tls_dir) / "ca.pem"

    # ----------------------------------------------------------------------------- generation
    @classmethod
    def generate(cls, mode: SecurityMode, run_dir: Path) -> SecurityState:
        if mode not in SECURITY_MODES:
            raise ValueError(f"security must be one of {', '.join(SECURITY_MODES)}, got {mode!r}")
        state = cls(mode=mode)
        if not state.enabled:
            return state
        state.admin_password = secrets.token_urlsafe(18)
        state.controller_password = secrets.token_urlsafe(18)
        tls = run_dir / "tls"
        tls.mkdir(parents=True, exist_ok=True, mode=0o700)
        state.tls_dir = str(tls)
        if state.tls:
            _openssl(
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", CERT_DAYS,
                "-subj", "/CN=eosconnect-devkafka-ca",
                "-keyout", str(tls / "ca.key"), "-out", str(tls / "ca.pem"),
            )  # fmt: skip
            state.issue_certificate(BROKER_USER)
            if mode == "ssl":
                state.issue_certificate(SUPER_USER)
        return state

    def issue_certificate(self, name: str) -> tuple[Path, Path]:
        """A key and a certificate (CN=`name`, valid for 127.0.0.1 and localhost) signed by the CA."""
        tls = Path(self.tls_dir)
        key, csr, cert = tls / f"{name}.key", tls / f"{name}.csr", tls / f"{name}.pem"
        ext = tls / f"{name}.ext"
        ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        _openssl(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            f"/CN={name}",
            "-keyout",
            str(key),
            "-out",
            str(csr),
        )
        _openssl(
            "x509", "-req", "-in", str(csr), "-CA", str(self.ca_file), "-CAkey", str(tls / "ca.key"),
            "-CAcreateserial", "-days", CERT_DAYS, "-extfile", str(ext), "-out", str(cert),
        )  # fmt: skip
        # Kafka's PEM key store: the private key (PKCS#8, unencrypted) followed by the chain.
        (tls / f"{name}.keystore.pem").write_text(key.read_text() + cert.read_text())
        return key, cert

    # ----------------------------------------------------------------------------- broker side
    def broker_properties(self, node_is_broker: bool) -> dict[str, str]:
        """server.properties entries for listeners, authentication and the authorizer."""
        if not self.enabled:
            return {}
        plain_jaas = (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{CONTROLLER_USER}" password="{self.controller_password}" '
            f'user_{CONTROLLER_USER}="{self.controller_password}";'
        )
        props = {
            "listener.security.protocol.map": f"{CLIENT_LISTENER}:{self.protocol},CONTROLLER:SASL_PLAINTEXT",
            "sasl.mechanism.controller.protocol": "PLAIN",
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.controller.plain.sasl.jaas.config": plain_jaas,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "false",
            "super.users": ";".join(f"User:{u}" for u in (SUPER_USER, BROKER_USER, CONTROLLER_USER)),
        }
        if not node_is_broker:
            return props
        lname = CLIENT_LISTENER.lower()
        props["inter.broker.listener.name"] = CLIENT_LISTENER
        if self.sasl:
            scram_jaas = (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                f'username="{SUPER_USER}" password="{self.admin_password}";'
            )
            props[f"listener.name.{lname}.sasl.enabled.mechanisms"] = SCRAM_MECHANISM
            props[f"listener.name.{lname}.{SCRAM_MECHANISM.lower()}.sasl.jaas.config"] = scram_jaas
            props["sasl.mechanism.inter.broker.protocol"] = SCRAM_MECHANISM
        if self.tls:
            tls = Path(self.tls_dir)
            props.update(
                {
                    f"listener.name.{lname}.ssl.keystore.type": "PEM",
                    f"listener.name.{lname}.ssl.keystore.location": str(tls / f"{BROKER_USER}.keystore.pem"),
                    f"listener.name.{lname}.ssl.truststore.type": "PEM",
                    f"listener.name.{lname}.ssl.truststore.location": str(self.ca_file),
                }
            )
        if self.mode == "ssl":
            props[f"listener.name.{lname}.ssl.client.auth"] = "required"
            # CN=worker -> User:worker, as SCRAM names it: the same ACLs work in every mode.
            props["ssl.principal.mapping.rules"] = "RULE:^CN=([^,]+)$/$1/,DEFAULT"
        return props

    def format_arguments(self) -> list[str]:
        """`kafka-storage format` arguments: the super user's SCRAM credential exists from the start,
        so the broker can authenticate to itself before any admin call could create it."""
        if not self.sasl:
            return []
        return ["--add-scram", f"{SCRAM_MECHANISM}=[name={SUPER_USER},password={self.admin_password}]"]

    # ----------------------------------------------------------------------------- client side
    def client_settings(self, user: str = SUPER_USER, password: str | None = None) -> dict[str, str]:
        """librdkafka settings (the names `eosconnect worker`, `verify` and `-X` take) for `user`."""
        if not self.enabled:
            return {}
        settings = {"security.protocol": self.protocol}
        if self.sasl:
            settings["sasl.mechanism"] = SCRAM_MECHANISM
            settings["sasl.username"] = user
            settings["sasl.password"] = self.admin_password if password is None else password
        if self.tls:
            settings["ssl.ca.location"] = str(self.ca_file)
        if self.mode == "ssl":
            tls = Path(self.tls_dir)
            settings["ssl.certificate.location"] = str(tls / f"{user}.pem")
            settings["ssl.key.location"] = str(tls / f"{user}.key")
        return settings


# --------------------------------------------------------------------------------- users and ACLs
def _binding(acl: Acl) -> Any:
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType
    from confluent_kafka.admin import ResourceType as RT

    resource_types = {
        "topic": RT.TOPIC,
        "group": RT.GROUP,
        "transactionalid": RT.TRANSACTIONAL_ID,
        "cluster": RT.BROKER,
    }
    operation = AclOperation[_snake(acl.operation)]
    return AclBinding(
        resource_types[acl.resource_type.lower()],
        acl.resource_name,
        ResourcePatternType[acl.pattern],
        acl.principal if ":" in acl.principal else f"User:{acl.principal}",
        "*",
        operation,
        AclPermissionType.ALLOW,
    )


def _snake(name: str) -> str:
    """`DescribeConfigs` -> `DESCRIBE_CONFIGS`, confluent_kafka's enum names."""
    out = "".join(f"_{c}" if c.isupper() and i else c for i, c in enumerate(name))
    return out.upper()


def grant(admin_config: Mapping[str, str], acls: Iterable[Acl], timeout: float = 30.0) -> None:
    """Create the ACLs (with the super user's `admin_config`) and wait until the broker has them."""
    from confluent_kafka.admin import AdminClient

    bindings = [_binding(a) for a in acls]
    if not bindings:
        return
    admin = AdminClient({**admin_config, "log_level": 0})
    for fut in admin.create_acls(bindings, request_timeout=timeout).values():
        fut.result(timeout)


def revoke(admin_config: Mapping[str, str], acls: Iterable[Acl], timeout: float = 30.0) -> None:
    """Delete exactly these ACLs."""
    from confluent_kafka.admin import AclBindingFilter, AdminClient

    filters = []
    for acl in acls:
        b = _binding(acl)
        filters.append(
            AclBindingFilter(
                b.restype,
                b.name,
                b.resource_pattern_type,
                b.principal,
                b.host,
                b.operation,
                b.permission_type,
            )
        )
    if not filters:
        return
    admin = AdminClient({**admin_config, "log_level": 0})
    for fut in admin.delete_acls(filters, request_timeout=timeout).values():
        fut.result(timeout)


def create_scram_users(
    admin_config: Mapping[str, str], users: Mapping[str, str], timeout: float = 30.0
) -> None:
    """Create (or change the passwords of) SCRAM-SHA-512 users, name -> password, in one admin
    request (the secured soak makes six: one round trip, not six)."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialAlteration,
        UserScramCredentialUpsertion,
    )

    if not users:
        return
    admin = AdminClient({**admin_config, "log_level": 0})
    upserts: list[UserScramCredentialAlteration] = [
        UserScramCredentialUpsertion(
            name, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), password.encode()
        )
        for name, password in users.items()
    ]
    for fut in admin.alter_user_scram_credentials(upserts, request_timeout=timeout).values():
        fut.result(timeout)
