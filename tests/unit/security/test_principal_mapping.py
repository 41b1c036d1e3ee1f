"""ssl.principal.mapping.rules parse and map as Kafka's SslPrincipalMapper (its own test cases)."""

from __future__ import annotations

import pytest

from odradek.security.principal_mapping import NoMatchingRule, PrincipalMapper, parse_rules


@pytest.mark.parametrize(
    "rules",
    [
        "DEFAULT",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
        "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
        "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
        "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
    ],
)
def test_valid_rules(rules):
    assert parse_rules(rules)


@pytest.mark.parametrize(
    "rules",
    [
        "DEFAULT/L",
        "DEFAUL",
        "DEFAULT/U",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1/L/U",
        "RULE:CN=(.*?),OU=ServiceUsers.*/L",
        "RULE:CN=(.*?),OU=ServiceUsers.*/U",
        "RULE:CN=(.*?),OU=ServiceUsers.*/LU",
        "RULE:CN=(.*?,OU=x/$1/",  # not a regular expression
    ],
)
def test_invalid_rules(rules):
    with pytest.raises(ValueError, match="Invalid rule"):
        parse_rules(rules)


def test_the_first_rule_that_applies_gives_the_name():
    mapper = PrincipalMapper.from_rules(
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,"
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U,"
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,"
        "DEFAULT"
    )
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=javasoft,dc=example,dc=com") == "DUKE@JAVASOFT"
    assert mapper.name("cN=Duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert (
        mapper.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"
    )


def test_escaped_slashes_and_commas():
    assert PrincipalMapper.from_rules(r"RULE:^CN=(.*)\/x$/$1\/y/,DEFAULT").name("CN=a/x") == "a/y"
    mapper = PrincipalMapper.from_rules(r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name(r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz") == r"Tkac\, Adam"


def test_a_back_reference_past_the_last_group_stays_literal():
    assert PrincipalMapper.from_rules("RULE:^CN=(.*)$/$1-$2/").name("CN=a") == "a-$2"


def test_no_rule_that_applies_is_an_error():
    mapper = PrincipalMapper.from_rules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/")
    with pytest.raises(NoMatchingRule, match="No rules apply to CN=x,OU=Other"):
        mapper.name("CN=x,OU=Other")


def test_empty_rules_are_ignored():
    assert [str(r) for r in parse_rules(" DEFAULT , ,")] == ["DEFAULT"]
