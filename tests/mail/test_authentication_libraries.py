"""The internals of pyspf and dkimpy that ``mail.authentication.adapter`` relies on: each check
fails naming the library, its version and what moved, so that an upgrade is read against that
module before it ships. No nameserver needed: nothing here resolves."""

from __future__ import annotations

import inspect
from importlib.metadata import version

import dkim
import spf

from mail.authentication import adapter

PYSPF = f"pyspf {version('pyspf')}"
DKIMPY = f"dkimpy {version('dkimpy')}"


def test_the_versions_the_adapter_was_written_against() -> None:
    """A new version needs the checks below read again, and the pins in pyproject.toml moved."""
    assert version("pyspf") == adapter.PYSPF_VERSION, f"{PYSPF}: the adapter knows 2.0.14"
    assert version("dkimpy").startswith(adapter.DKIMPY_VERSIONS), f"{DKIMPY}: the adapter knows 1.1"


def test_pyspf_resolves_through_the_module_level_lookup_we_replace() -> None:
    assert spf.DNSLookup is adapter._spf_lookup, f"{PYSPF}: spf.DNSLookup was replaced again"
    source = inspect.getsource(spf.query.dns)
    assert "DNSLookup(name, qtype, self.strict, timeout)" in source, (
        f"{PYSPF}: query.dns no longer calls the module's DNSLookup as the adapter expects"
    )
    parameters = list(inspect.signature(spf.query).parameters)
    assert parameters[:3] == ["i", "s", "h"] and "querytime" in parameters, (
        f"{PYSPF}: spf.query takes {parameters}"
    )
    assert hasattr(spf.query, "check") and issubclass(spf.TempError, Exception), PYSPF


def test_dkimpy_verifies_a_signature_in_the_steps_the_adapter_takes() -> None:
    for name in ("verify_headerprep", "verify_sig"):
        assert callable(getattr(dkim.DKIM, name, None)), f"{DKIMPY}: DKIM.{name} is gone"
    assert list(inspect.signature(dkim.DKIM.verify_sig).parameters) == [
        "self",
        "sig",
        "include_headers",
        "sig_header",
        "dnsfunc",
    ], f"{DKIMPY}: DKIM.verify_sig's parameters moved"
    assert "load_pk_from_dns" in inspect.getsource(dkim.DomainSigner.verify_sig), (
        f"{DKIMPY}: verify_sig no longer loads the key through the dnsfunc it is given"
    )
    assert callable(dkim.rfc822_parse), f"{DKIMPY}: rfc822_parse is gone"
    assert (dkim.CV_Pass, dkim.CV_Fail, dkim.CV_None) == (b"pass", b"fail", b"none"), DKIMPY
    assert issubclass(dkim.ValidationError, dkim.DKIMException), DKIMPY


def test_the_verifiers_accept_the_quiet_logger() -> None:
    """dkimpy logs every failed signature at error level; the adapter hands it a logger that
    drops everything, through the constructor's public ``logger`` parameter."""
    assert "logger" in inspect.signature(dkim.DKIM).parameters, DKIMPY
    assert "logger" in inspect.signature(dkim.ARC).parameters, DKIMPY
