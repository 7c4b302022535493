"""Which URLs a webhook may be delivered to (contract section 10).

A webhook makes the server send requests to a URL an API caller chose, so the URL is checked
twice: when the webhook is created (its form, and its host when the host is an address) and
at every delivery (every address its host resolves to then), because a name can resolve to
anything later. Refused:

- anything but ``http``/``https`` with a host; user information (``user:pass@``: it would be
  shown by ``GET .../webhooks`` and the audit log, and sent as Basic auth); port 0; white
  space or control characters anywhere (a URL is not trimmed, it is refused);
- hosts that are, or resolve to, addresses that are not global: loopback, private,
  unspecified, shared and reserved ranges; unless the operator sets
  ``FLAGSIGHT_WEBHOOK_ALLOW_PRIVATE=1`` (receivers on the same network);
- link-local addresses (cloud metadata at 169.254.169.254, fe80::/10) always.

Not covered: a name that resolves to a public address when checked and to a private one a
moment later, when the HTTP client resolves it again (DNS rebinding within one delivery).

A webhook stored before user information was refused keeps it in its stored URL (and in the
audit record of its creation). It is never delivered to (``check_delivery`` refuses it), and
every surface shows its URL through ``shown_url``, which masks the user information.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str], Iterable[str]]

_LOCAL_NAMES = ("localhost", ".localhost", ".localdomain")
USER_INFO_MASK = "***"
_C0_OR_SPACE = "".join(map(chr, range(0x21)))
_DROPPED_BY_PARSERS = str.maketrans("", "", "\t\r\n")


class ForbiddenTarget(ValueError):
    """The URL may not be a webhook's; the message says why, naming no secret."""


class MalformedTarget(ForbiddenTarget):
    """Refused for the URL's form (white space, scheme, user information, port): no setting
    and no change of DNS can lift it, so a delivery to it is given up at once."""


def refusal(address: Address, allow_private: bool) -> str | None:
    """Why a delivery may not go to ``address``, or None when it may."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_link_local:
        return "a link-local address (such as cloud metadata)"
    if address.is_global or allow_private:
        return None
    if address.is_loopback:
        return "a loopback address"
    if address.is_unspecified:
        return "an unspecified address"
    return "a private or reserved address"


def check_url(url: str, allow_private: bool) -> str:
    """The URL's host, or ForbiddenTarget: its form, and the host when it is an address."""
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url):
        raise MalformedTarget("must not contain white space or control characters")
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port  # .port checks the range
    except ValueError:
        raise MalformedTarget("must be an http:// or https:// URL with a valid port") from None
    if parts.scheme not in ("http", "https") or not host:
        raise MalformedTarget("must be an http:// or https:// URL with a host")
    if "@" in parts.netloc:
        raise MalformedTarget("must not contain user information (user:password@)")
    if port == 0:
        raise MalformedTarget("must not use port 0")
    try:
        address: Address | None = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if address is not None:
        reason = refusal(address, allow_private)
        if reason:
            raise ForbiddenTarget(f"must not point to {reason}")
    elif not allow_private and (host == "localhost" or host.endswith(_LOCAL_NAMES)):
        raise ForbiddenTarget("must not point to a loopback address")
    return host


def shown_url(url: str) -> str:
    """The webhook URL as the admin API, the dashboard and the audit log show it: unchanged,
    except that user information is replaced by ``***`` as a whole
    (``http://user:pass@host/x`` -> ``http://***@host/x``).

    The whole of it, not only the password: a user name is often the credential itself (a
    token as the user, an API key as the user with an empty password). Masked rather than
    dropped: a legacy webhook still reads as what it is (its scheme, host, port, path and
    query are shown, and its id beside it), and visibly carries credentials, the reason every
    delivery to it is refused; shown as ``http://host/x`` it would look like a webhook that
    works. Every URL the rule accepts has no user information, so it is shown as stored.

    Never raises, whatever was stored: the authority is found as URL parsers find it (after
    ``//``, up to the first ``/``, ``?`` or ``#``; the user information up to its last ``@``),
    after dropping what they drop (tabs and line breaks anywhere, leading control characters
    and spaces), so a URL whose password a client would send has it masked.
    """
    text = url.translate(_DROPPED_BY_PARSERS).lstrip(_C0_OR_SPACE)
    start = text.find("//")
    if start < 0:
        return url
    start += 2
    end = next((i for i in range(start, len(text)) if text[i] in "/?#"), len(text))
    at = text.rfind("@", start, end)
    if at < 0:
        return url
    return text[:start] + USER_INFO_MASK + text[at:]


def system_resolver(host: str) -> list[str]:
    """Every address ``host`` resolves to now (the system's resolver)."""
    return [info[4][0] for info in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)]


def check_delivery(url: str, allow_private: bool, resolve: Resolver | None = None) -> None:
    """ForbiddenTarget unless the URL, and every address its host resolves to now, may be
    delivered to. A name that does not resolve is not refused here: the POST fails and is
    retried like any unreachable receiver."""
    host = check_url(url, allow_private)
    try:
        addresses = list((resolve or system_resolver)(host))
    except OSError:
        return
    for text in addresses:
        reason = refusal(ipaddress.ip_address(text.split("%", 1)[0]), allow_private)
        if reason:
            raise ForbiddenTarget(f"its host {host} resolves to {reason}")
