"""bench.object_latency's storage options: the broker settings they add, and
their errors."""
import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from bench.object_latency import put_budget_arg, storage_settings

ROOT = Path(__file__).resolve().parents[3]


def test_no_option_adds_nothing():
    assert storage_settings() == ""


def test_each_option_adds_its_setting():
    text = storage_settings(sections_per_ledger=4000, collect_every=60, put_budget=50)
    assert "object_sections_per_ledger = 4000\n" in text
    assert "object_collect_interval_s = 60\n" in text
    assert "object_put_budget_per_s = 50\n" in text


def test_a_budget_of_zero_is_kept_as_no_budget():
    # 0 is the broker's "no budget", not "the default": it must reach the config.
    assert storage_settings(put_budget=0) == "object_put_budget_per_s = 0\n"


def test_a_negative_budget_is_refused():
    with pytest.raises(ValueError, match="PUT budget"):
        storage_settings(put_budget=-1)
    with pytest.raises(ValueError, match="floor"):
        storage_settings(put_budget_floor=-1)


def test_the_budget_floor_reaches_the_config_even_at_zero():
    assert storage_settings(put_budget_floor=250) == "object_put_budget_floor_per_s = 250\n"
    assert storage_settings(put_budget_floor=0) == "object_put_budget_floor_per_s = 0\n"


@pytest.mark.parametrize("text", ["x", "-5", "nan", ""])
def test_put_budget_arg_gives_a_clear_error(text):
    with pytest.raises(argparse.ArgumentTypeError):
        put_budget_arg(text)


def test_put_budget_arg_reads_a_rate():
    assert put_budget_arg("50") == 50.0
    assert put_budget_arg("0") == 0.0


@pytest.mark.parametrize("option, value, error", [
    ("--put-budget", "abc", "not a number of PUTs a second: 'abc'"),
    ("--put-budget-floor", "-3", "0 (none) or more PUTs a second"),
    ("--broker-env", "nope", "expected NAME=VALUE"),
])
def test_the_command_line_refuses_a_bad_option_before_starting_anything(option, value, error):
    done = subprocess.run([sys.executable, "-m", "bench.object_latency", option, value],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert error in done.stderr
    assert "Traceback" not in done.stderr


def test_broker_env_arg_reads_a_name_and_a_value():
    from bench.object_latency import broker_env_arg
    assert broker_env_arg("LD_PRELOAD=/usr/lib/libjemalloc.so.2") == ("LD_PRELOAD", "/usr/lib/libjemalloc.so.2")
    # The value may itself hold '=' (MALLOC_CONF takes key:value,key:value) or be empty.
    assert broker_env_arg("MALLOC_CONF=a=b") == ("MALLOC_CONF", "a=b")
    assert broker_env_arg("EMPTY=") == ("EMPTY", "")


@pytest.mark.parametrize("text", ["LD_PRELOAD", "=x", "A B=1", "A-B=1"])
def test_broker_env_arg_gives_a_clear_error(text):
    from bench.object_latency import broker_env_arg
    with pytest.raises(argparse.ArgumentTypeError, match="NAME=VALUE"):
        broker_env_arg(text)
