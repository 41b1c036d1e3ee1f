"""skaffold.yaml uses only fields of its declared schema version, and what it hands Helm works.

No skaffold binary can be installed here (neither PyPI nor npm ships one), and the upstream JSON
schema is not vendored. SHAPE restates, for the fields skaffold.yaml uses, the shape those fields
have in Skaffold's published schema skaffold/v4beta13 (docs-v2/content/en/schemas/v4beta13.json
in GoogleContainerTools/skaffold: SkaffoldConfig, BuildConfig, Artifact with DockerArtifact,
LocalBuild, DeployConfig.helm = LegacyHelmDeploy, HelmRelease, PortForwardResource, Profile,
Activation, JSONPatch). Every object is closed, as upstream's are (additionalProperties: false),
so a misspelt or unknown field fails here as `skaffold diagnose` would; a field upstream has but
SHAPE lacks fails too, and must be checked against the schema before it is added to SHAPE.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
import pytest
import yaml

from support.chart import CHART, ROOT, by_kind, render

pytestmark = pytest.mark.k8s

SKAFFOLD = ROOT / "skaffold.yaml"
API_VERSION = "skaffold/v4beta13"


def closed(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


STRING = {"type": "string"}
STRINGS = {"type": "array", "items": STRING}
BOOLEAN = {"type": "boolean"}
INTEGER = {"type": "integer"}
ANY_MAP = {"type": "object"}

HOST_HOOK = closed({"command": STRINGS, "os": STRINGS, "dir": STRING}, ("command",))
HELM_RELEASE = closed(
    {
        "name": STRING,
        "chartPath": STRING,
        "namespace": STRING,
        "createNamespace": BOOLEAN,
        "valuesFiles": STRINGS,
        "setValues": ANY_MAP,
        "setValueTemplates": ANY_MAP,
        "wait": BOOLEAN,
        "dependsOn": STRINGS,
    },
    ("name",),
)
BUILD = closed(
    {
        "artifacts": {
            "type": "array",
            "items": closed(
                {
                    "image": STRING,
                    "context": STRING,
                    "docker": closed(
                        {"dockerfile": STRING, "buildArgs": ANY_MAP, "target": STRING}
                    ),
                    # BuildHooks of HostHook (skaffold.dev/docs/lifecycle-hooks)
                    "hooks": closed(
                        {
                            "before": {"type": "array", "items": HOST_HOOK},
                            "after": {"type": "array", "items": HOST_HOOK},
                        }
                    ),
                },
                ("image",),
            ),
        },
        "local": closed({"push": BOOLEAN, "useBuildkit": BOOLEAN, "concurrency": INTEGER}),
    }
)
DEPLOY = closed({"helm": closed({"releases": {"type": "array", "items": HELM_RELEASE}})})
PORT_FORWARD = {
    "type": "array",
    "items": closed(
        {
            "resourceType": STRING,
            "resourceName": STRING,
            "namespace": STRING,
            "port": {"type": ["integer", "string"]},
            "localPort": {"type": "integer"},
            "address": STRING,
        }
    ),
}
PROFILE = closed(
    {
        "name": STRING,
        "activation": {
            "type": "array",
            "items": closed({"command": STRING, "env": STRING, "kubeContext": STRING}),
        },
        "patches": {
            "type": "array",
            "items": closed({"op": STRING, "path": STRING, "from": STRING, "value": {}}, ("path",)),
        },
        "build": BUILD,
        "deploy": DEPLOY,
        "portForward": PORT_FORWARD,
    },
    ("name",),
)
SHAPE = closed(
    {
        "apiVersion": {"const": API_VERSION},
        "kind": {"const": "Config"},
        "metadata": closed({"name": STRING}),
        "build": BUILD,
        "deploy": DEPLOY,
        "portForward": PORT_FORWARD,
        "profiles": {"type": "array", "items": PROFILE},
    },
    ("apiVersion", "kind"),
)


def config() -> dict[str, Any]:
    return yaml.safe_load(SKAFFOLD.read_text())


def with_profile(cfg: dict[str, Any], name: str) -> dict[str, Any]:
    """The config with one profile's JSON patches applied (add and replace, as skaffold does)."""
    cfg = copy.deepcopy(cfg)
    (profile,) = [p for p in cfg["profiles"] if p["name"] == name]
    for patch in profile["patches"]:
        *parents, last = patch["path"].strip("/").split("/")
        node: Any = cfg
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if patch.get("op", "replace") == "replace":
            assert last in node, f"replace of a missing {patch['path']}"
        node[int(last) if isinstance(node, list) else last] = patch["value"]
    del cfg["profiles"]
    return cfg


def test_skaffold_config_has_the_schema_shape() -> None:
    jsonschema.validate(config(), SHAPE)


def test_a_misspelt_field_is_refused() -> None:
    bad = config()
    bad["deploy"]["helm"]["releases"][0]["chartpath"] = "charts/odradek"
    with pytest.raises(jsonschema.ValidationError, match="chartpath"):
        jsonschema.validate(bad, SHAPE)


def test_dev_profile_patches_apply() -> None:
    cfg = config()
    (dev,) = cfg["profiles"]
    assert dev["name"] == "dev" and dev["activation"] == [{"command": "dev"}]
    patched = with_profile(cfg, "dev")
    jsonschema.validate(patched, SHAPE)
    assert patched["deploy"]["helm"]["releases"][0]["setValues"] == {"operator.verbose": True}


def test_the_built_artifact_is_the_image_the_chart_runs() -> None:
    (artifact,) = config()["build"]["artifacts"]
    assert artifact["image"] == "odradek" and artifact["docker"]["dockerfile"] == "Dockerfile"
    (ROOT / "Dockerfile").exists() or pytest.skip("no Dockerfile in this tree yet (image helper)")


@pytest.mark.parametrize("profile", [None, "dev"])
def test_each_release_renders_with_what_skaffold_passes(profile: str | None) -> None:
    """The releases in order: the chart with the built image, then the examples beside it."""
    cfg = config() if profile is None else with_profile(config(), profile)
    releases = cfg["deploy"]["helm"]["releases"]
    assert [r["name"] for r in releases] == ["odradek", "odradek-example"]
    assert releases[1]["dependsOn"] == ["odradek"]
    objs: list[list[dict[str, Any]]] = []
    for release in releases:
        assert (ROOT / release["chartPath"]).resolve() == CHART
        values = [ROOT / v for v in release.get("valuesFiles", [])] or [CHART / "values.yaml"]
        sets = {"image.repository": "localhost/odradek", "image.tag": "abc123"}
        sets = {k: sets[k] for k in release.get("setValueTemplates", {})}
        sets.update({k: str(v).lower() for k, v in release.get("setValues", {}).items()})
        extra: tuple[str, ...] = ()
        for key, value in sets.items():
            extra += ("--set", f"{key}={value}")
        objs.append(render(values[0], crds_served=True, extra=extra))
    (deployment,) = by_kind(objs[0], "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "localhost/odradek:abc123"
    assert ("--verbose" in container["args"]) == (profile == "dev")
    example = [o for o in objs[1] if o["apiVersion"].startswith("odradek.io/")]
    assert sorted(o["kind"] for o in example) == ["OdradekCluster", "OdradekTopic"]
    (cluster,) = by_kind(example, "OdradekCluster")
    forwarded = cfg["portForward"][0]["resourceName"]
    assert forwarded == f"{cluster['metadata']['name']}-bootstrap"


def test_the_wheels_the_dockerfile_installs_are_built_before_the_image() -> None:
    (artifact,) = config()["build"]["artifacts"]
    (hook,) = artifact["hooks"]["before"]
    assert hook["command"] == ["bash", "scripts/build_image.sh", "--wheels-only"]
    assert (ROOT / "scripts" / "build_image.sh").exists()
