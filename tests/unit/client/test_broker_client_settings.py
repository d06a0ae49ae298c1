"""The broker's own client credential and TLS settings (replicators): Pulsar's
brokerClientAuthentication* forms, and settings that cannot work together."""
from __future__ import annotations

import pytest

from magnetar.client.auth import (Authentication, AuthenticationBasic, AuthenticationTLS, AuthenticationToken,
                                  from_broker_client_settings)
from magnetar.security.settings import SecuritySettings, SecuritySettingsError


def test_pulsars_plugin_names_and_parameter_forms():
    assert type(from_broker_client_settings("", "")) is Authentication
    assert isinstance(from_broker_client_settings("token", "token:abc"), AuthenticationToken)
    assert isinstance(from_broker_client_settings("basic", "u:p"), AuthenticationBasic)
    for plugin in ("tls", "org.apache.pulsar.client.impl.auth.AuthenticationTls"):
        auth = from_broker_client_settings(plugin, "tlsCertFile:/c/cert.pem, tlsKeyFile:/c/key.pem")
        assert isinstance(auth, AuthenticationTLS)
        assert (auth.certificate_path, auth.private_key_path, auth.method) == ("/c/cert.pem", "/c/key.pem", "tls")
    json_form = from_broker_client_settings("tls", '{"tlsCertFile": "/a.pem", "tlsKeyFile": "/b.pem"}')
    assert (json_form.certificate_path, json_form.private_key_path) == ("/a.pem", "/b.pem")
    with pytest.raises(ValueError, match="tlsCertFile"):
        from_broker_client_settings("tls", "tlsCertFile:/only-the-cert.pem")
    with pytest.raises(ValueError, match="token, basic or tls"):
        from_broker_client_settings("kerberos", "x")


def test_a_tls_credential_needs_the_broker_client_on_tls():
    settings = SecuritySettings(broker_client_authentication_plugin="tls",
                                broker_client_authentication_parameters="tlsCertFile:/c,tlsKeyFile:/k")
    with pytest.raises(SecuritySettingsError, match="broker_client_tls_enabled"):
        settings.validate_security()
    settings.broker_client_tls_enabled = True
    settings.validate_security()


def test_the_broker_client_trusts_tls_trust_certs_file_unless_told_otherwise():
    assert SecuritySettings(tls_trust_certs_file="/ca.pem").broker_client_trust_certs == "/ca.pem"
    assert SecuritySettings(tls_trust_certs_file="/ca.pem",
                            broker_client_trust_certs_file_path="/remote-ca.pem").broker_client_trust_certs \
        == "/remote-ca.pem"


def test_replicator_tls_files_that_cannot_be_used_are_refused_at_once(tmp_path):
    from magnetar.client.errors import InvalidConfiguration
    from magnetar.replication.remote import RemoteClusters

    with pytest.raises(InvalidConfiguration, match="no-ca.pem"):
        RemoteClusters(None, tls=True, trust_certs_file=str(tmp_path / "no-ca.pem"))
    with pytest.raises(InvalidConfiguration, match="no-cert.pem"):
        RemoteClusters(None, tls=True, authentication=AuthenticationTLS(str(tmp_path / "no-cert.pem"),
                                                                        str(tmp_path / "no-key.pem")))
    RemoteClusters(None, tls=False, trust_certs_file=str(tmp_path / "no-ca.pem"))  # plain: the file is not used
