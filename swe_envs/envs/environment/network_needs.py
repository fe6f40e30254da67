"""Whether a test log says the tests need a network (the sandbox has none unless the spec says
"bridge"): a connection that failed, or a live service's credential the suite demands.

Used where a run fails offline: the validator (FAIL_TO_PASS that needs network) and the builder
(a suite that cannot even load offline, e.g. ruby-akismet 3.0.0, whose test helper raises
"Set the AKISMET_API_KEY environment variable to an API key obtained from akismet.com"), so
such environments and instances are reported as needing network, with the log's own words.
"""

from __future__ import annotations

import re

# a test that fails for want of a network
NETWORK_ERRORS = re.compile(r"Temporary failure in name resolution|Name or service not known|Network is unreachable|"
                            r"nodename nor servname|getaddrinfo (?:ENOTFOUND|EAI_AGAIN|failed)|Could not resolve host|"
                            r"NewConnectionError|Failed to establish a new connection|urlopen error|"
                            r"dial tcp: lookup|Connection refused")
# the name of an environment variable that holds a service's credential ...
_CREDENTIAL = re.compile(r"\b[A-Z][A-Z0-9_]*(?:API_?KEY|API_TOKEN|ACCESS_TOKEN|AUTH_TOKEN|SECRET_KEY|"
                         r"ACCESS_KEY(?:_ID)?|CLIENT_SECRET)\b")
# ... on a line that says it must be set (a raise in a test helper, a KeyError from os.environ,
# Ruby's ENV.fetch), not merely a test named after one
_MUST_BE_SET = re.compile(r"[Ee]nvironment variable|\bENV\b|os\.environ|KeyError|key not found|[Nn]ot set|"
                          r"is required|\b[Mm]issing\b|\b[Ss]et (?:the )?[A-Z][A-Z0-9_]+\b")


def network_needed(logs: list[str]) -> str | None:
    """The log's words that say the tests need a network, or None."""
    for log in logs:
        if m := NETWORK_ERRORS.search(log):
            return m.group(0)
    for log in logs:
        for line in log.splitlines():
            if _CREDENTIAL.search(line) and _MUST_BE_SET.search(line):
                return line.strip()[:300]
    return None
