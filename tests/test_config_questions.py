"""Questions for what builds, ships and runs the code: CI workflows, Dockerfiles, Helm templates, Terraform, make
targets (a newcomer, session 41: none of 16 such questions had its file in the top 10; read as asking for code,
then reordered by a ranker that learned from source changes). A small real workspace (tests/fixtures/infra) where
the code also speaks of probes, workers and memory limits, the whole engine (vectors and the learned ranker on)."""

from __future__ import annotations

from pathlib import Path

import pytest

from delphi_ls import Engine
from delphi_ls.core import Kind
from delphi_ls.retrieval.query import analyse
from delphi_ls.workspace.kinds import file_kind
from tests.conftest import copy_fixture

ASKED = [
    ("where is CI configured", ".github/workflows/ci.yml"),
    ("which workflow runs the tests", ".github/workflows/ci.yml"),
    ("which workflow publishes the package", ".github/workflows/release.yml"),
    ("where is the liveness probe configured", "charts/api/templates/deployment.yaml"),
    ("where is the helm deployment template for the api", "charts/api/templates/deployment.yaml"),
    ("where is the postgres instance defined in terraform", "terraform/modules/db/main.tf"),
    ("which Dockerfile builds the worker image", "Dockerfile.worker"),
]


@pytest.fixture(scope="module")
def eng(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("infra")
    root = copy_fixture("infra", tmp / "ws")
    with Engine(root, index_dir=str(tmp / "idx")) as e:
        e.index()
        yield e


@pytest.mark.parametrize(("question", "expected"), ASKED)
def test_a_question_for_ci_containers_or_infrastructure_answers_with_that_file(eng: Engine, question: str,
                                                                               expected: str):
    ans = eng.context(question, limit=5)
    assert ans["query"]["prefer"] == ["config"], ans["query"]
    assert ans["results"][0]["path"] == expected, [r["path"] for r in ans["results"]]


@pytest.mark.parametrize(("question", "prefer", "shape"), [
    ("where is the liveness endpoint implemented", {Kind.CODE}, "english"),  # the code's, by name
    ("where is the code that builds the docker image", {Kind.CODE}, "english"),
    ("how does the parser handle yaml files", {Kind.CODE}, "english"),
    ("which tests cover the worker", {Kind.TEST}, "test"),
    ("where is the docker client created", {Kind.CODE}, "english"),  # a Docker SDK's own code
    ("where is the training pipeline defined", {Kind.CODE}, "english"),
    ("Which source files implement this change? Add a CI workflow for the docs", {Kind.CODE}, "english"),
    # What code does to them, in a workflow engine, a Terraform provider, a controller (a review, session 41).
    ("where is the workflow state persisted", {Kind.CODE}, "english"),
    ("where does the terraform provider create the bucket resource", set(), "english"),
    ("how does the controller reconcile the ingress", {Kind.CODE}, "english"),
    ("where is the helm chart tested", {Kind.TEST}, "test"),
    ("which CI tests are flaky", {Kind.TEST}, "test"),
    ("Support ingress v1 API", set(), "english"),  # a change's title: no question asked
])
def test_config_words_that_do_not_ask_for_config(question: str, prefer: set, shape: str):
    q = analyse(question)
    assert q.prefer == prefer and q.shape.value == shape, (q.prefer, q.shape)


def test_a_make_target_question_has_the_makefile_near_the_top(eng: Engine):
    # Not first: the CI workflow also runs `pytest -q tests`, and "make" is not the Makefile's name to the path branch.
    top = [r["path"] for r in eng.context("which make target runs the tests", limit=5)["results"]]
    assert "Makefile" in top[:3] and all(file_kind(p) == "config" for p in top[:3]), top


def test_the_code_of_the_same_words_is_still_found_when_code_is_asked_for(eng: Engine):
    assert eng.context("where is the liveness endpoint implemented", limit=3)["results"][0]["path"] == "app/health.py"
    top = [r["path"] for r in eng.context("which tests cover the worker", limit=3)["results"]]
    assert top[0] == "tests/test_worker.py"


@pytest.mark.parametrize("path", ["terraform/main.tf", "modules/vpc/variables.hcl",
                                  "Dockerfile.worker", "docker/api.Dockerfile", "Jenkinsfile", "services/go.mod",
                                  "build/rules.mk"])
def test_infrastructure_and_build_files_are_config(path: str):
    assert file_kind(path) == "config"


@pytest.mark.parametrize(("path", "kind"), [("pkg/dockerfile/dockerfile.go", "code"),  # kaniko's, moby's parser
                                            ("templates/page.tpl", "other")])  # PHP's and Go's templates too
def test_names_like_build_files_that_are_not(path: str, kind: str):
    assert file_kind(path) == kind


def test_a_kind_filter_for_config_finds_terraform(eng: Engine, tmp_path: Path):
    ans = eng.context("backup retention period of the orders database", limit=3, kinds=["config"])
    assert ans["results"][0]["path"] == "terraform/modules/db/main.tf"
