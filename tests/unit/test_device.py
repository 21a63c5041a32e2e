"""A session's device in a few words, from what its User-Agent says."""

import pytest

from gateway.core.device import MAX_DEVICE, device_of

CHROME_LINUX = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36"


@pytest.mark.parametrize(
    ("user_agent", "device"),
    [
        (CHROME_LINUX, "Chrome on Linux"),
        (CHROME_LINUX.replace("Chrome/", "HeadlessChrome/"), "Chrome on Linux"),
        (
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:127.0) Gecko/20100101 Firefox/127.0",
            "Firefox on Windows",
        ),
        (
            "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko)"
            " Version/17.5 Safari/605.1.15",
            "Safari on macOS",
        ),
        (
            "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko)"
            " Version/17.5 Mobile/15E148 Safari/604.1",
            "Safari on iPhone",
        ),
        (
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0"
            " Safari/537.36 Edg/126.0.2592.87",
            "Edge on Windows",
        ),
        (
            "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0"
            " Mobile Safari/537.36",
            "Chrome on Android",
        ),
        ("Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 Chrome/126.0.0.0", "Chrome on ChromeOS"),
        ("python-httpx/0.27.0", "python-httpx"),
        ("Python/3.12 websockets/13.1", "Python"),
        ("curl/8.5.0", "curl"),
        ("", "Unknown"),
        ("  ", "Unknown"),
        ("/// \u00e9\u00e9", "Unknown"),
    ],
)
def test_a_user_agent_names_a_browser_on_its_system_or_a_tool(user_agent: str, device: str) -> None:
    assert device_of(user_agent) == device


def test_a_tools_name_is_kept_short() -> None:
    assert device_of("x" * 10_000 + "/1.0") == "x" * MAX_DEVICE
