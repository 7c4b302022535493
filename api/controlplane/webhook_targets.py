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
- link-local addresses (cloud metadata at 169.254.169.254, fe80::/10), multicast and
  reserved ranges always.

The host is judged as the HTTP client will use it (``client_host``: after percent-decoding
and IDNA, ``%31%32%37.0.0.1`` is 127.0.0.1), and an IPv6 address by the IPv4 addresses it
embeds too (mapped, compatible, NAT64, 6to4, Teredo), so no spelling of a forbidden address
passes. A host the client cannot use, or that is no valid name, is refused for its form; at a
delivery, a lookup that fails for the name's form fails that delivery alone.

Not covered: a name that resolves to a public address when checked and to a private one a
moment later, when the HTTP client resolves it again (DNS rebinding within one delivery).

A webhook stored before user information was refused keeps it in its stored URL (and in the
audit record of its creation). It is never delivered to (``check_delivery`` refuses it), and
every surface shows its URL through ``shown_url``, which masks the user information.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

import requests

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


_NAT64 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_NUMERIC = re.compile(r"(?:0x[0-9a-f]*|[0-9]+)(?:\.(?:0x[0-9a-f]*|[0-9]+))*\.?")
"""A host of numbers alone, which resolvers read as an IPv4 address in its legacy forms."""


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries, which a network may route it to: mapped
    (``::ffff:a.b.c.d``), compatible (``::a.b.c.d``), NAT64 (``64:ff9b::a.b.c.d`` and the
    local-use ``64:ff9b:1::/48``), 6to4 (``2002:AABB:CCDD::``) and Teredo (server and
    client)."""
    found = []
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    packed = address.packed
    if packed[:12] == bytes(12) and int(address) > 1:  # compatible, not :: or ::1
        found.append(ipaddress.IPv4Address(packed[12:]))
    if any(address in network for network in _NAT64):
        found.append(ipaddress.IPv4Address(packed[12:]))
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    return found


def refusal(address: Address, allow_private: bool) -> str | None:
    """Why a delivery may not go to ``address``, or None when it may: every address it names,
    the IPv4 ones an IPv6 form embeds included, must be global unicast (or, with
    ``allow_private``, anything but link-local, multicast and reserved)."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = embedded_ipv4(address)
        for inner in embedded:
            reason = refusal(inner, allow_private)
            if reason:
                return reason
        if embedded:
            return None  # a form that reaches what it embeds: judged by that
    if address.is_link_local:
        return "a link-local address (such as cloud metadata)"
    if address.is_multicast:
        return "a multicast address"
    if address.is_loopback:
        return None if allow_private else "a loopback address"
    if address.is_unspecified:
        return None if allow_private else "an unspecified address"
    if address.is_reserved:
        return "a reserved address"
    if address.is_global or allow_private:
        return None
    return "a private or reserved address"


def client_host(url: str) -> str:
    """The host as the HTTP client will connect to it: after its own percent-decoding, case
    folding and IDNA encoding (``http://%31%32%37.0.0.1/`` is 127.0.0.1 to it), so the rules
    judge what the client will use, not what was written. MalformedTarget when the client
    would refuse it, or when it is neither an address nor a valid DNS name (labels of 1 to 63
    letters, digits, hyphens or underscores, 253 characters in all)."""
    prepared = requests.models.PreparedRequest()
    try:
        prepared.prepare_url(url, None)
        host = urlsplit(prepared.url).hostname
    except (requests.RequestException, ValueError, UnicodeError):
        raise MalformedTarget("must have a host an HTTP client can use") from None
    if not host:
        raise MalformedTarget("must be an http:// or https:// URL with a host")
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    if _NUMERIC.fullmatch(host):
        try:  # what the resolver makes of 127.1, 0x7f.0.0.1 or 2130706433
            return socket.inet_ntoa(socket.inet_aton(host))
        except OSError:
            raise MalformedTarget("must have a valid host name or address") from None
    labels = host.rstrip(".").split(".")
    if len(host) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise MalformedTarget("must have a valid host name (labels of at most 63 characters)")
    return host


def check_url(url: str, allow_private: bool) -> str:
    """The host the client will use, or ForbiddenTarget: the URL's form, and the host when it
    is an address."""
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url):
        raise MalformedTarget("must not contain white space or control characters")
    try:
        parts = urlsplit(url)
        written, port = parts.hostname, parts.port  # .port checks the range
    except ValueError:
        raise MalformedTarget("must be an http:// or https:// URL with a valid port") from None
    if parts.scheme not in ("http", "https") or not written:
        raise MalformedTarget("must be an http:// or https:// URL with a host")
    if "@" in parts.netloc:
        raise MalformedTarget("must not contain user information (user:password@)")
    if port == 0:
        raise MalformedTarget("must not use port 0")
    host = client_host(url)
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
    except (UnicodeError, ValueError):
        raise MalformedTarget("must have a host that can be resolved") from None
    except OSError:
        return
    for text in addresses:
        reason = refusal(ipaddress.ip_address(text.split("%", 1)[0]), allow_private)
        if reason:
            raise ForbiddenTarget(f"its host {host} resolves to {reason}")
