"""Where the CURVE key files of a gateway and a worker host live (`vllm-omni-mlx keys DIR`).

    DIR/gateway/client.key_secret   the gateway's key pair (keep it secret)
    DIR/gateway/server.key          the worker host's public key (which host to trust)
    DIR/host/server.key_secret      the worker host's key pair (keep it secret)
    DIR/host/clients/*.key          public keys of the gateways the host lets in

Copy DIR/host to the worker's machine (`worker --keys DIR/host`) and keep DIR/gateway with
the gateway (`serve --keys DIR/gateway`); each side then holds only its own secret. Either
side also takes DIR itself and uses its own subdirectory. Another gateway's client.key in
clients/ lets that one in too (one gateway at a time uses a host). The files are zmq.auth's
certificate format; this module only names them (it imports no zmq).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

GATEWAY_DIR, HOST_DIR = "gateway", "host"
CLIENT_SECRET, SERVER_PUBLIC = "client.key_secret", "server.key"
SERVER_SECRET, CLIENTS_DIR = "server.key_secret", "clients"


class KeysError(ValueError):
    """A keys directory without the files its side needs."""


@dataclass(frozen=True)
class GatewayKeys:
    client_secret: Path  # the gateway's own pair
    server_public: Path  # the host's public key


@dataclass(frozen=True)
class HostKeys:
    server_secret: Path  # the host's own pair
    clients: Path  # directory of allowed gateways' public keys


def _side(directory: str | Path, side: str, marker: str) -> Path:
    root = Path(directory).expanduser()
    if not (root / marker).is_file() and (root / side / marker).is_file():
        return root / side
    return root


def gateway_keys(directory: str | Path) -> GatewayKeys:
    root = _side(directory, GATEWAY_DIR, CLIENT_SECRET)
    keys = GatewayKeys(root / CLIENT_SECRET, root / SERVER_PUBLIC)
    for path in (keys.client_secret, keys.server_public):
        if not path.is_file():
            raise KeysError(f"{path} is missing (make the keys with `vllm-omni-mlx keys DIR`)")
    return keys


def host_keys(directory: str | Path) -> HostKeys:
    root = _side(directory, HOST_DIR, SERVER_SECRET)
    keys = HostKeys(root / SERVER_SECRET, root / CLIENTS_DIR)
    if not keys.server_secret.is_file():
        raise KeysError(
            f"{keys.server_secret} is missing (make the keys with `vllm-omni-mlx keys DIR`)"
        )
    if not keys.clients.is_dir() or not any(keys.clients.glob("*.key")):
        raise KeysError(f"{keys.clients} holds no gateway public key (*.key): nobody could connect")
    return keys
