"""pki.plan: CAs made, renewed and brought; leaves issued, re-issued in Strimzi's order (trust
both CAs, then new leaves once every pod rolled, then the old CA out), a new pod's leaf added
without changing the hash that rolls the pods."""

from __future__ import annotations

import datetime

import pytest

from odradek_operator.pki import certs, plan, secrets
from odradek_operator.pki.plan import CaRefused

NOW = datetime.datetime(2026, 12, 3, 12, 0, tzinfo=datetime.UTC)
DAY = datetime.timedelta(days=1)
NAMES = ("demo-cluster-ca-cert", "demo-cluster-ca")
PODS = {"demo-broker-0": ["b0.svc"], "demo-broker-1": ["b1.svc"]}


def ca_plan(cert=None, key=None, generation=0, now=NOW, generate=True, validity=365, renewal=30):
    return plan.plan_ca(
        common_name="demo-cluster-ca",
        cert_data=cert or {},
        key_data=key or {},
        generation=generation,
        generate=generate,
        validity_days=validity,
        renewal_days=renewal,
        now=now,
        secret_names=NAMES,
    )


def leaves(ca, data=None, annotations=None, rolled=True, now=NOW, pods=PODS):
    return plan.plan_leaves(
        ca=ca,
        common_name="demo-broker",
        pods=pods,
        data=data or {},
        annotations=annotations,
        all_rolled=rolled,
        now=now,
        validity_days=365,
        renewal_days=30,
    )


def signer(data, pod, ca):
    pem = data[f"{pod}.pem"]
    return certs.signed_by(pem[pem.index("-----BEGIN CERTIFICATE-----") :], ca.ca.cert_pem)


def test_a_ca_is_made_once_and_then_kept():
    first = ca_plan()
    assert first.changed and first.generation == 0
    again = ca_plan(first.cert_data, first.key_data)
    assert not again.changed and again.ca == first.ca


def test_a_generated_ca_is_renewed_with_the_old_one_kept_in_the_bundle():
    first = ca_plan()
    later = NOW + 336 * DAY  # 29 days before expiry
    renewed = ca_plan(first.cert_data, first.key_data, now=later)
    assert renewed.changed and renewed.generation == 1 and renewed.ca != first.ca
    assert list(secrets.retained_ca_certs(renewed.cert_data).values()) == [first.ca.cert_pem]
    assert len(certs.parse_certificates(renewed.trust)) == 2
    # The old one leaves the bundle by drop_retained (step 3), or once it has expired.
    assert len(certs.parse_certificates(plan.drop_retained(renewed).trust)) == 1
    expired = ca_plan(renewed.cert_data, renewed.key_data, generation=1, now=NOW + 366 * DAY)
    assert expired.changed and not secrets.retained_ca_certs(expired.cert_data)


def test_a_brought_ca_is_read_never_made_nor_replaced():
    with pytest.raises(CaRefused) as missing:
        ca_plan(generate=False)
    assert missing.value.reason == "CertificateAuthorityMissing"
    assert "demo-cluster-ca-cert" in str(missing.value)
    mine = certs.make_ca("my-ca", now=NOW, validity_days=10)
    cert, key = secrets.ca_cert_data(mine), secrets.ca_key_data(mine)
    kept = ca_plan(cert, key, generate=False, now=NOW + 9 * DAY)  # within renewal: not renewed
    assert not kept.changed and kept.ca == mine
    with pytest.raises(CaRefused) as expired:
        ca_plan(cert, key, generate=False, now=NOW + 11 * DAY)
    assert expired.value.reason == "CertificateAuthorityExpired"
    other = certs.make_ca("other", now=NOW, validity_days=10)
    with pytest.raises(CaRefused) as invalid:
        ca_plan(cert, secrets.ca_key_data(other), generate=False)
    assert invalid.value.reason == "CertificateAuthorityInvalid"
    with pytest.raises(CaRefused):  # half there: refused, not replaced
        ca_plan(cert, {}, generate=True)


def test_leaves_are_made_for_every_pod_and_a_new_pod_does_not_roll_the_others():
    ca = ca_plan()
    made = leaves(ca)
    assert (
        made.changed
        and made.reissued
        and set(made.data)
        == {
            "demo-broker-0.pem",
            "demo-broker-1.pem",
            "ca.crt",
        }
    )
    assert made.annotations["odradek.io/ca-generation"] == "0"
    same = leaves(ca, made.data, made.annotations)
    assert not same.changed
    three = {**PODS, "demo-broker-2": ["b2.svc"]}
    grown = leaves(ca, made.data, made.annotations, pods=three)
    assert grown.changed and "demo-broker-2.pem" in grown.data
    assert grown.certificates_hash == made.certificates_hash  # nobody rolls
    assert grown.data["demo-broker-0.pem"] == made.data["demo-broker-0.pem"]


def test_leaves_near_expiry_are_reissued_once_every_pod_runs_the_current_ones():
    ca = ca_plan(validity=3650)  # the CA outlives the leaves (365 days)
    made = leaves(ca)
    later = NOW + 340 * DAY
    waiting = leaves(ca, made.data, made.annotations, rolled=False, now=later)
    assert waiting.waiting and waiting.certificates_hash == made.certificates_hash
    renewed = leaves(ca, made.data, made.annotations, rolled=True, now=later)
    assert renewed.reissued and renewed.certificates_hash != made.certificates_hash
    assert renewed.data["demo-broker-0.pem"] != made.data["demo-broker-0.pem"]
    assert renewed.not_after == later + 365 * DAY


def test_a_leaf_that_ends_with_its_ca_is_not_reissued_at_every_pass():
    mine = certs.make_ca("my-ca", now=NOW, validity_days=40)
    ca = ca_plan(secrets.ca_cert_data(mine), secrets.ca_key_data(mine), generate=False)
    made = leaves(ca)
    assert made.not_after == mine.certificate.not_valid_after_utc  # never past its CA
    later = NOW + 20 * DAY  # within renewalDays of the leaf's (and the CA's) end
    ca_later = ca_plan(
        secrets.ca_cert_data(mine), secrets.ca_key_data(mine), generate=False, now=later
    )
    assert not leaves(ca_later, made.data, made.annotations, now=later).changed


def test_a_new_ca_is_trusted_first_then_signs_then_the_old_one_goes():
    old = ca_plan()
    made = leaves(old)
    renewed = ca_plan(old.cert_data, old.key_data, now=NOW + 336 * DAY)
    step1 = leaves(renewed, made.data, made.annotations, rolled=True, now=NOW + 336 * DAY)
    assert step1.changed and not step1.reissued  # leaves untouched, trust both
    assert step1.data["demo-broker-0.pem"] == made.data["demo-broker-0.pem"]
    assert len(certs.parse_certificates(step1.data["ca.crt"])) == 2
    assert step1.generation == 0 and step1.certificates_hash != made.certificates_hash
    # Not every pod runs step 1 yet: the leaves wait.
    held = leaves(renewed, step1.data, step1.annotations, rolled=False, now=NOW + 337 * DAY)
    assert not held.reissued and held.waiting
    step2 = leaves(renewed, step1.data, step1.annotations, rolled=True, now=NOW + 337 * DAY)
    assert step2.reissued and step2.generation == 1
    assert signer(step2.data, "demo-broker-0", renewed)
    assert len(certs.parse_certificates(step2.data["ca.crt"])) == 2
    step3 = leaves(plan.drop_retained(renewed), step2.data, step2.annotations, now=NOW + 338 * DAY)
    assert not step3.reissued and len(certs.parse_certificates(step3.data["ca.crt"])) == 1
    assert step3.certificates_hash != step2.certificates_hash
