"""`planner catalog refresh` for every provider with a price API (GCP, Lambda, RunPod, Vast.ai,
DigitalOcean, Cudo, Hyperbolic, Fluidstack) and `refresh all`; the stale-price warning naming the
command that refreshes each catalog.

All answers are recorded, hand-written files in tests/data/refresh/ (see its README); fetches get
fake sessions, API keys come from a patched environment and a temporary home folder, so nothing
here touches the network or the machine's own credentials.
"""

from __future__ import annotations

import json
import math
from datetime import date
from pathlib import Path

import pandas as pd
import pytest

from planner.errors import PlannerError
from planner.load import (
    refresh_aws,
    refresh_azure,
    refresh_cudo,
    refresh_do,
    refresh_fluidstack,
    refresh_gcp,
    refresh_hyperbolic,
    refresh_lambda,
    refresh_runpod,
    refresh_vast,
)
from planner.load.catalog import (
    load_catalog,
    load_gpus,
    load_providers,
    price_age_warning,
    read_offers,
    shipped_catalog_names,
)
from planner.load.offer_facts import OTHER_REGION_TAG, SAME_REGION_TAG
from planner.load.refresh import write_offers_csv
from planner.load.refresh_sources import NO_PRICE_API, PRICE_APIS

DATA = Path(__file__).resolve().parent / "data" / "refresh"
KEY_ENVS = (
    "GOOGLE_API_KEY",
    "LAMBDA_API_KEY",
    "RUNPOD_API_KEY",
    "DIGITALOCEAN_TOKEN",
    "DIGITALOCEAN_ACCESS_TOKEN",
    "HYPERBOLIC_API_KEY",
    "FLUIDSTACK_API_KEY",
)


def answer(name: str):
    return json.loads((DATA / name).read_text())


def row(frame: pd.DataFrame, region: str, instance_type: str) -> pd.Series:
    hit = frame[(frame.region == region) & (frame.instance_type == instance_type)]
    assert len(hit) == 1, (region, instance_type, frame[["region", "instance_type"]])
    return hit.iloc[0]


@pytest.fixture(autouse=True)
def no_keys(monkeypatch, tmp_path):
    """No API key of the machine's reaches a test: none in the environment, an empty home."""
    for name in KEY_ENVS:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture(scope="module")
def gpus():
    return load_gpus()


# ---------------------------------------------------------------- fakes (no network)


class FakeResponse:
    def __init__(self, status: int = 200, payload=None, body: str = ""):
        self.status_code, self.payload, self.body = status, payload, body

    @property
    def text(self) -> str:
        return json.dumps(self.payload) if self.payload is not None else self.body

    def json(self):
        if self.payload is None:
            raise ValueError("not JSON")
        return self.payload


class FakeSession:
    """Answers GETs and POSTs from a list (an exception is raised), recording each call."""

    def __init__(self, *answers):
        self.answers, self.calls = list(answers), []

    def _answer(self, method, url, kwargs):
        self.calls.append((method, url, kwargs))
        reply = self.answers.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def get(self, url, **kwargs):
        return self._answer("GET", url, kwargs)

    def post(self, url, **kwargs):
        return self._answer("POST", url, kwargs)


def one_line(excinfo) -> str:
    text = str(excinfo.value)
    assert "\n" not in text
    return text


# ---------------------------------------------------------------- GCP


@pytest.fixture(scope="module")
def gcp(gpus):
    pages = [answer("gcp_skus_page1.json"), answer("gcp_skus_page2.json")]
    return refresh_gcp.gcp_offers(pages, gpus)


def test_gcp_prices_machines_from_core_ram_and_gpu_skus(gcp):
    n1 = row(gcp, "us-central1", "n1-standard-8+T4x1")
    # 8 vCPUs x 0.031611 + 30 GiB x 0.004237 + 1 T4 x 0.40; spot from the Preemptible SKUs
    assert n1.on_demand_usd_h == pytest.approx(8 * 0.031611 + 30 * 0.004237 + 0.40)
    assert n1.spot_usd_h == pytest.approx(8 * 0.00698 + 30 * 0.000936 + 0.07)
    a2 = row(gcp, "us-central1", "a2-highgpu-1g")  # "Tesla A100", not "Tesla A100 80GB"
    assert a2.on_demand_usd_h == pytest.approx(12 * 0.0316 + 85 * 0.0042 + 2.8)
    assert math.isnan(a2.spot_usd_h)  # no Preemptible A2 SKU in the answer
    ultra = row(gcp, "us-central1", "a2-ultragpu-1g")
    assert ultra.on_demand_usd_h == pytest.approx(12 * 0.0316 + 170 * 0.0042 + 3.9)


def test_gcp_a4_is_priced_by_gpu_slices_and_skips_dws(gcp):
    a4 = row(gcp, "us-central1", "a4-highgpu-8g")
    assert (a4.on_demand_usd_h, a4.spot_usd_h) == (pytest.approx(88.48), 32.0)


def test_gcp_commitments_custom_and_reserved_skus_are_not_prices(gcp):
    n1 = row(gcp, "us-east1", "n1-standard-8+T4x1")
    assert n1.on_demand_usd_h == pytest.approx(8 * 0.031611 + 30 * 0.004237 + 0.40)


def test_gcp_keeps_shipped_facts_and_counts_sizes_without_skus(gcp):
    a4 = row(gcp, "us-central1", "a4-highgpu-8g")
    assert (a4.gpu, a4.gpus_per_node, a4.vcpus, a4.ram_gib) == ("B200", 8, 224, 3968)
    assert SAME_REGION_TAG in a4.notes.split(";")
    assert a4.spot_preemption_per_h == 0.24
    # no A3 SKU in the answer: left out (not priced from the shipped file), and counted
    assert "a3-highgpu-8g" not in set(gcp.instance_type)
    assert "us-central1/a3-highgpu-8g" in gcp.attrs["unpriced_offers"]
    assert gcp.attrs["unknown_instance_types"] == []


def test_fetch_gcp_sends_the_key_in_a_header_and_follows_pages(monkeypatch):
    monkeypatch.setenv("GOOGLE_API_KEY", "secret-gcp-key")
    first, second = answer("gcp_skus_page1.json"), answer("gcp_skus_page2.json")
    session = FakeSession(FakeResponse(payload=first), FakeResponse(payload=second))
    pages = list(refresh_gcp.fetch_gcp(session=session))
    assert [len(p["skus"]) for p in pages] == [9, 8]
    (_, url1, kw1), (_, url2, kw2) = session.calls
    assert url1 == url2 == refresh_gcp.GCP_SKUS_URL
    assert kw1["headers"] == {"X-Goog-Api-Key": "secret-gcp-key"}
    assert "secret-gcp-key" not in json.dumps(kw1["params"])
    assert (
        "pageToken" not in kw1["params"]
        and kw2["params"]["pageToken"] == "page-2-token"
    )


def test_fetch_gcp_without_a_key_names_the_variable():
    with pytest.raises(PlannerError) as err:
        list(refresh_gcp.fetch_gcp(session=FakeSession()))
    assert "set GOOGLE_API_KEY" in one_line(err)


def test_fetch_gcp_http_403_says_to_check_the_key(monkeypatch):
    monkeypatch.setenv("GOOGLE_API_KEY", "bad")
    denied = FakeResponse(403, payload={"error": {"message": "API key not valid"}})
    with pytest.raises(PlannerError) as err:
        list(refresh_gcp.fetch_gcp(session=FakeSession(denied)))
    text = one_line(err)
    assert "answered HTTP 403" in text and text.endswith(
        "check GOOGLE_API_KEY (an API key with the Cloud Billing API enabled)"
    )


# ---------------------------------------------------------------- Lambda


@pytest.fixture(scope="module")
def lam(gpus):
    return refresh_lambda.lambda_offers(answer("lambda_instance_types.json"), gpus)


def test_lambda_prices_per_region_with_capacity_in_notes(lam):
    a10 = row(lam, "us-east-1", "gpu_1x_a10")
    assert a10.on_demand_usd_h == 0.86 and math.isnan(a10.spot_usd_h)
    assert "capacity_available" in a10.notes.split(";")
    assert (
        "availability_unknown" not in a10.notes
    )  # the shipped tag does not carry over
    elsewhere = row(lam, "us-west-1", "gpu_1x_a10")  # shipped there, no capacity now
    assert "capacity_unavailable" in elsewhere.notes.split(";")
    h100 = lam[lam.instance_type == "gpu_8x_h100_sxm5"]
    assert len(h100) == 17 and set(h100.on_demand_usd_h) == {28.72}
    assert all("capacity_unavailable" in n for n in h100.notes)


def test_lambda_keeps_facts_and_counts_unknown_sizes(lam):
    a10 = row(lam, "us-east-1", "gpu_1x_a10")
    assert (a10.gpu, a10.gpus_per_node, a10.vcpus, a10.ram_gib) == ("A10", 1, 30, 200)
    new_region = row(
        lam, "europe-west-9", "gpu_1x_a10"
    )  # capacity in a region not shipped
    assert new_region.gpu == "A10" and OTHER_REGION_TAG in new_region.notes.split(";")
    assert lam.attrs["unknown_instance_types"] == ["gpu_1x_b300_sxm6"]
    assert "gpu_1x_b300_sxm6" not in set(lam.instance_type)


def test_fetch_lambda_key_from_env_or_sky_file(monkeypatch, no_keys):
    payload = answer("lambda_instance_types.json")
    monkeypatch.setenv("LAMBDA_API_KEY", "env-key")
    session = FakeSession(FakeResponse(payload=payload))
    assert refresh_lambda.fetch_lambda(session=session) == payload
    method, url, kwargs = session.calls[0]
    assert (method, url) == ("GET", refresh_lambda.LAMBDA_URL)
    assert kwargs["headers"] == {"Authorization": "Bearer env-key"}
    monkeypatch.delenv("LAMBDA_API_KEY")
    (no_keys / ".lambda_cloud").mkdir()
    (no_keys / ".lambda_cloud" / "lambda_keys").write_text("api_key = file-key\n")
    session = FakeSession(FakeResponse(payload=payload))
    refresh_lambda.fetch_lambda(session=session)
    assert session.calls[0][2]["headers"] == {"Authorization": "Bearer file-key"}


def test_fetch_lambda_errors_are_one_line(monkeypatch):
    with pytest.raises(PlannerError) as err:
        refresh_lambda.fetch_lambda(session=FakeSession())
    assert one_line(err) == (
        "no Lambda Cloud API key: set LAMBDA_API_KEY (or save it in ~/.lambda_cloud/lambda_keys)"
    )
    monkeypatch.setenv("LAMBDA_API_KEY", "k")
    unauthorized = FakeResponse(
        401, payload={"error": {"code": "global/invalid-api-key"}}
    )
    with pytest.raises(PlannerError) as err:
        refresh_lambda.fetch_lambda(session=FakeSession(unauthorized))
    assert "HTTP 401" in one_line(err) and one_line(err).endswith(
        "check LAMBDA_API_KEY"
    )
    with pytest.raises(PlannerError, match="not JSON"):
        refresh_lambda.fetch_lambda(session=FakeSession(FakeResponse(body="<html>")))
    with pytest.raises(PlannerError, match="without a 'data' object"):
        refresh_lambda.fetch_lambda(session=FakeSession(FakeResponse(payload={"x": 1})))


# ---------------------------------------------------------------- RunPod


@pytest.fixture(scope="module")
def runpod(gpus):
    return refresh_runpod.runpod_offers(answer("runpod_gpu_types.json"), gpus)


def test_runpod_prices_times_gpus_with_stock_in_notes(runpod):
    one = row(runpod, "US", "1x_H100-SXM_SECURE")
    assert (one.on_demand_usd_h, one.spot_usd_h) == (2.69, 1.75)
    assert "stock_high" in one.notes.split(";")
    eight = row(runpod, "CA", "8x_H100-SXM_SECURE")
    assert eight.on_demand_usd_h == pytest.approx(8 * 2.69)
    assert eight.spot_usd_h == pytest.approx(8 * 1.75)
    assert "stock_none" in eight.notes.split(";")
    assert "stock_low" in row(runpod, "US", "4x_H100-SXM_SECURE").notes.split(";")
    a6000 = row(
        runpod, "US", "2x_RTXA6000_SECURE"
    )  # "RTX A6000" -> SkyPilot's RTXA6000
    assert a6000.on_demand_usd_h == pytest.approx(0.98) and math.isnan(a6000.spot_usd_h)
    assert math.isnan(a6000.spot_preemption_per_h)


def test_runpod_keeps_facts_and_counts_unknown_sizes(runpod):
    one = row(runpod, "US", "1x_H100-SXM_SECURE")
    assert (one.gpu, one.gpus_per_node, one.vcpus) == ("H100-SXM", 1, 20)
    assert "regions_from_shipped_catalog" in one.notes.split(";")
    assert one.spot_preemption_per_h == 0.5
    mi300 = row(
        runpod, "US", "1x_MI300X_SECURE"
    )  # spot at the on-demand price: no spot
    assert math.isnan(mi300.spot_usd_h) and "spot_no_discount" in mi300.notes
    assert runpod.attrs["unknown_instance_types"] == [
        f"{n}x_B300_SECURE" for n in (1, 2, 4, 8)
    ]
    assert not runpod.instance_type.str.contains("RTX3070").any()  # no secure cloud


def test_runpod_gpu_names_follow_skypilot():
    assert refresh_runpod.runpod_gpu_name("A100 SXM") == "A100-80GB-SXM"
    assert refresh_runpod.runpod_gpu_name("RTX 4000 Ada") == "RTX4000-Ada"
    assert refresh_runpod.runpod_gpu_name("RTX PRO 6000") == "RTXPRO6000"
    assert refresh_runpod.runpod_gpu_name("H100 PCIe") == "H100"


def test_fetch_runpod_posts_graphql_with_key_as_parameter(monkeypatch, no_keys):
    payload = answer("runpod_gpu_types.json")
    session = FakeSession(FakeResponse(payload=payload))
    assert refresh_runpod.fetch_runpod(session=session) == payload
    method, url, kwargs = session.calls[0]
    assert (method, url) == ("POST", refresh_runpod.RUNPOD_URL)
    assert "params" not in kwargs  # the prices are public: no key, none sent
    query = kwargs["json"]["query"]
    assert "securePrice" in query and "secureSpotPrice" in query
    assert (
        "c8: lowestPrice(input: {gpuCount: 8, secureCloud: true}) { stockStatus }"
        in query
    )
    (no_keys / ".runpod").mkdir()
    (no_keys / ".runpod" / "config.toml").write_text('[default]\napi_key = "rp-key"\n')
    session = FakeSession(FakeResponse(payload=payload))
    refresh_runpod.fetch_runpod(session=session)
    assert session.calls[0][2]["params"] == {"api_key": "rp-key"}


def test_fetch_runpod_graphql_errors_and_offline_are_one_line(monkeypatch):
    monkeypatch.setenv("RUNPOD_API_KEY", "rp-secret")
    errors = {"errors": [{"message": "Something went wrong\nsee logs"}], "data": None}
    with pytest.raises(PlannerError) as err:
        refresh_runpod.fetch_runpod(session=FakeSession(FakeResponse(payload=errors)))
    assert one_line(err).startswith(
        "the RunPod GraphQL API answered an error: Something"
    )
    offline = ConnectionError(
        "HTTPSConnectionPool(host='api.runpod.io', port=443): Max retries exceeded with url: "
        "/graphql?api_key=rp-secret (Caused by NameResolutionError)"
    )
    with pytest.raises(PlannerError) as err:
        refresh_runpod.fetch_runpod(session=FakeSession(offline))
    text = one_line(err)
    assert (
        text.startswith("cannot reach the RunPod GraphQL API")
        and "rp-secret" not in text
    )


# ---------------------------------------------------------------- Vast.ai


@pytest.fixture(scope="module")
def vast(gpus):
    return refresh_vast.vast_offers(answer("vast_bundles.json"), gpus)


def test_vast_prices_the_lower_median_per_model_count_and_place(vast):
    h100 = row(vast, "Florida, US, NA", "1x-H100_SXM-32-65536")
    assert h100.on_demand_usd_h == 2.15  # of 1.85, 2.15, 2.65
    assert {"marketplace_offer", "machines_listed_3", SAME_REGION_TAG} <= set(
        h100.notes.split(";")
    )
    assert math.isnan(h100.spot_usd_h)
    sweden = row(vast, "Sweden, SE, EU", "4x-RTX_4090-32-65536")
    assert sweden.gpu == "RTX4090" and sweden.gpus_per_node == 4
    assert OTHER_REGION_TAG in sweden.notes.split(";")
    assert vast.attrs["unknown_instance_types"] == ["2x-RTX_5880Ada-48-256000"]


def test_fetch_vast_posts_a_search_without_an_account():
    session = FakeSession(FakeResponse(payload=answer("vast_bundles.json")))
    assert len(refresh_vast.fetch_vast(session=session)["offers"]) == 5
    method, url, kwargs = session.calls[0]
    assert (method, url) == ("POST", refresh_vast.VAST_URL) and "headers" not in kwargs
    assert kwargs["json"]["rentable"] == {"eq": True}
    with pytest.raises(PlannerError, match="HTTP 429"):
        refresh_vast.fetch_vast(
            session=FakeSession(FakeResponse(429, body="slow down"))
        )
    with pytest.raises(PlannerError, match="without an 'offers' list"):
        refresh_vast.fetch_vast(session=FakeSession(FakeResponse(payload={"x": []})))


# ---------------------------------------------------------------- DigitalOcean


@pytest.fixture(scope="module")
def do(gpus):
    pages = [answer("do_sizes_page1.json"), answer("do_sizes_page2.json")]
    return refresh_do.do_offers(pages, gpus)


def test_do_prices_gpu_sizes_per_region(do):
    one = row(do, "tor1", "gpu-h100x1-80gb")
    assert (one.on_demand_usd_h, one.vcpus, one.ram_gib) == (3.39, 20, 240)
    assert (one.gpu, one.gpus_per_node) == ("H100-SXM", 1)
    assert OTHER_REGION_TAG in row(do, "nyc2", "gpu-h100x1-80gb").notes.split(";")
    eight = row(do, "tor1", "gpu-h100x8-640gb")
    assert "capacity_unavailable" in eight.notes.split(";")  # available: false
    assert "s-1vcpu-1gb" not in set(do.instance_type)  # not a GPU size
    assert do.attrs["unknown_instance_types"] == ["gpu-mi300x1-192gb"]


def test_fetch_do_follows_next_links_with_the_token(monkeypatch, no_keys):
    (no_keys / ".config" / "doctl").mkdir(parents=True)
    (no_keys / ".config" / "doctl" / "config.yaml").write_text(
        "access-token: dop_v1_file\ncontext: default\n"
    )
    first, second = answer("do_sizes_page1.json"), answer("do_sizes_page2.json")
    session = FakeSession(FakeResponse(payload=first), FakeResponse(payload=second))
    assert len(list(refresh_do.fetch_do(session=session))) == 2
    (_, url1, kw1), (_, url2, kw2) = session.calls
    assert url1 == refresh_do.DO_SIZES_URL and kw1["params"] == {"per_page": 200}
    assert url2 == first["links"]["pages"]["next"] and "params" not in kw2
    assert kw1["headers"] == {"Authorization": "Bearer dop_v1_file"}
    monkeypatch.setenv("DIGITALOCEAN_TOKEN", "dop_v1_env")
    session = FakeSession(FakeResponse(payload=second))
    list(refresh_do.fetch_do(session=session))
    assert session.calls[0][2]["headers"] == {"Authorization": "Bearer dop_v1_env"}
    bad = {**first, "links": {"pages": {"next": "https://example.com/v2/sizes"}}}
    with pytest.raises(PlannerError, match="off api.digitalocean.com"):
        list(refresh_do.fetch_do(session=FakeSession(FakeResponse(payload=bad))))


def test_fetch_do_without_a_token_names_the_variable():
    with pytest.raises(PlannerError) as err:
        list(refresh_do.fetch_do(session=FakeSession()))
    assert one_line(err).startswith("no DigitalOcean API token: set DIGITALOCEAN_TOKEN")


# ---------------------------------------------------------------- Cudo, Hyperbolic, Fluidstack


def test_cudo_prices_each_shipped_size_from_unit_prices(gpus):
    cudo = refresh_cudo.cudo_offers(answer("cudo_machine_types.json"), gpus)
    small = row(cudo, "ca-montreal-3", "ice-lake-a40-compute_1x2v4gb")
    assert small.on_demand_usd_h == pytest.approx(2 * 0.0045 + 4 * 0.0028 + 0.35)
    assert (small.gpu, small.vcpus, small.ram_gib) == ("A40", 2, 4)
    assert "capacity_available" in small.notes.split(";")
    assert (
        "capacity_unavailable"
        in row(cudo, "ca-montreal-3", "ice-lake-a40-compute_8x64v128gb").notes
    )
    assert (
        "capacity_unavailable"
        in row(cudo, "se-stockholm-1", "ice-lake-a40-compute_1x2v4gb").notes
    )
    assert cudo.attrs["unknown_instance_types"] == ["sapphire-rapids-h200"]
    assert set(cudo.region) == {
        "ca-montreal-3",
        "se-stockholm-1",
    }  # CPU-only type skipped
    session = FakeSession(FakeResponse(payload=answer("cudo_machine_types.json")))
    refresh_cudo.fetch_cudo(session=session)
    assert session.calls[0][:2] == ("GET", refresh_cudo.CUDO_URL)


def test_hyperbolic_reads_skypilot_columns(gpus, monkeypatch):
    frame = refresh_hyperbolic.hyperbolic_offers(
        answer("hyperbolic_catalog.json"), gpus
    )
    one = row(frame, "default", "1x-H100-75-722")
    assert (one.on_demand_usd_h, one.gpu, one.vcpus) == (1.49, "H100-SXM", 75)
    assert frame.attrs["unknown_instance_types"] == ["1x-H200-44-361"]
    with pytest.raises(PlannerError) as err:
        refresh_hyperbolic.fetch_hyperbolic(session=FakeSession())
    assert "set HYPERBOLIC_API_KEY (or save it in ~/.hyperbolic/api_key)" in one_line(
        err
    )
    monkeypatch.setenv("HYPERBOLIC_API_KEY", "hb")
    session = FakeSession(FakeResponse(payload=answer("hyperbolic_catalog.json")))
    refresh_hyperbolic.fetch_hyperbolic(session=session)
    assert session.calls[0][2]["headers"] == {"Authorization": "Bearer hb"}


def test_fluidstack_prices_counts_and_regions(gpus, no_keys):
    frame = refresh_fluidstack.fluidstack_offers(
        answer("fluidstack_configurations.json"), gpus
    )
    four = row(frame, "GERMANY", "A100_PCIE_80GB::4")
    assert four.on_demand_usd_h == pytest.approx(6.6) and four.gpus_per_node == 4
    assert OTHER_REGION_TAG in row(frame, "ICELAND", "H100_NVLINK_80GB::8").notes
    assert frame.attrs["unknown_instance_types"] == ["L40_48GB::1", "L40_48GB::2"]
    (no_keys / ".fluidstack").mkdir()
    (no_keys / ".fluidstack" / "api_key").write_text("fs-key\n")
    session = FakeSession(
        FakeResponse(payload=answer("fluidstack_configurations.json"))
    )
    refresh_fluidstack.fetch_fluidstack(session=session)
    assert session.calls[0][2]["headers"] == {"api-key": "fs-key"}
    with pytest.raises(PlannerError, match="not a list of plans"):
        refresh_fluidstack.fetch_fluidstack(
            session=FakeSession(FakeResponse(payload={}))
        )


# ---------------------------------------------------------------- written catalogs load


PARSED = {
    "gcp": lambda g: refresh_gcp.gcp_offers(
        [answer("gcp_skus_page1.json"), answer("gcp_skus_page2.json")], g
    ),
    "lambda": lambda g: refresh_lambda.lambda_offers(
        answer("lambda_instance_types.json"), g
    ),
    "runpod": lambda g: refresh_runpod.runpod_offers(
        answer("runpod_gpu_types.json"), g
    ),
    "vast": lambda g: refresh_vast.vast_offers(answer("vast_bundles.json"), g),
    "do": lambda g: refresh_do.do_offers(
        [answer("do_sizes_page1.json"), answer("do_sizes_page2.json")], g
    ),
    "cudo": lambda g: refresh_cudo.cudo_offers(answer("cudo_machine_types.json"), g),
    "hyperbolic": lambda g: refresh_hyperbolic.hyperbolic_offers(
        answer("hyperbolic_catalog.json"), g
    ),
    "fluidstack": lambda g: refresh_fluidstack.fluidstack_offers(
        answer("fluidstack_configurations.json"), g
    ),
}


@pytest.mark.parametrize("provider", sorted(PARSED))
def test_every_refreshed_catalog_loads(provider, gpus, tmp_path):
    frame = PARSED[provider](gpus)
    assert len(frame) and set(frame.provider) == {provider}
    path = tmp_path / f"{provider}.csv"
    write_offers_csv(frame, path, source=PRICE_APIS[provider].api, as_of="2026-01-05")
    loaded, meta = read_offers(path, load_gpus(), load_providers())
    assert len(loaded) == len(frame) and meta["as_of"] == "2026-01-05"


# ---------------------------------------------------------------- the command as a user runs it


FETCHED = {  # what each provider's fetch returns, recorded
    "gcp": lambda *a, **k: iter(
        [answer("gcp_skus_page1.json"), answer("gcp_skus_page2.json")]
    ),
    "lambda": lambda *a, **k: answer("lambda_instance_types.json"),
    "runpod": lambda *a, **k: answer("runpod_gpu_types.json"),
    "vast": lambda *a, **k: answer("vast_bundles.json"),
    "do": lambda *a, **k: iter(
        [answer("do_sizes_page1.json"), answer("do_sizes_page2.json")]
    ),
    "cudo": lambda *a, **k: answer("cudo_machine_types.json"),
    "hyperbolic": lambda *a, **k: answer("hyperbolic_catalog.json"),
    "fluidstack": lambda *a, **k: answer("fluidstack_configurations.json"),
}
MODULES = {
    "gcp": refresh_gcp,
    "lambda": refresh_lambda,
    "runpod": refresh_runpod,
    "vast": refresh_vast,
    "do": refresh_do,
    "cudo": refresh_cudo,
    "hyperbolic": refresh_hyperbolic,
    "fluidstack": refresh_fluidstack,
}


def offline(provider):
    def fetch(*args, **kwargs):
        raise PlannerError(
            f"cannot reach the {provider} API (x): [Errno -3] Temporary failure"
        )

    return fetch


@pytest.mark.parametrize("provider", ["lambda", "runpod", "gcp"])
def test_catalog_refresh_writes_a_catalog_solve_uses(
    provider, run, tmp_path, monkeypatch, scenario_file
):
    monkeypatch.setattr(MODULES[provider], f"fetch_{provider}", FETCHED[provider])
    out = tmp_path / f"{provider}-today.csv"
    result = run("catalog", "refresh", provider, "-o", out)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("wrote ") and f"offers to {out}" in result.stdout
    frame, meta = read_offers(out, load_gpus(), load_providers())
    assert date.fromisoformat(meta["as_of"]) == date.today()
    assert meta["built_by"] == "planner price refresh"
    path = scenario_file(f"""\
        name: fresh
        catalogs: [{out}]
        workloads:
          - name: a
            kind: training
            memory: {{per_gpu: 10GiB}}
            work: {{gpu_hours: 10, reference_gpu: A100-80GB}}
        """)
    solved = run("solve", path)
    assert solved.exit_code == 0, solved.output
    assert "days old" not in solved.stderr  # today's prices: no stale warning


def test_catalog_refresh_says_what_it_skipped(run, tmp_path, monkeypatch):
    monkeypatch.setattr(refresh_runpod, "fetch_runpod", FETCHED["runpod"])
    result = run("catalog", "refresh", "runpod", "-o", tmp_path / "r.csv")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().endswith("; skipped 4 sizes the shipped catalog lacks")


def test_catalog_refresh_without_a_key_is_one_line(run, tmp_path):
    out = tmp_path / "lambda.csv"
    result = run("catalog", "refresh", "lambda", "-o", out)
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == [
        "error: no Lambda Cloud API key: set LAMBDA_API_KEY "
        "(or save it in ~/.lambda_cloud/lambda_keys)"
    ]
    assert not out.exists()


def test_catalog_refresh_of_a_provider_without_a_price_api_names_import(run, tmp_path):
    result = run("catalog", "refresh", "paperspace", "-o", tmp_path / "p.csv")
    assert result.exit_code == 2
    assert (
        "planner catalog import --from skypilot FILE --provider paperspace"
        in result.stderr
    )
    assert "no public price API" in result.stderr


def test_catalog_refresh_one_provider_into_a_folder_is_refused(
    run, tmp_path, monkeypatch
):
    monkeypatch.setattr(refresh_vast, "fetch_vast", FETCHED["vast"])
    result = run("catalog", "refresh", "vast", "-o", tmp_path)
    assert result.exit_code == 2
    assert "names a folder" in result.stderr and "catalog refresh all" in result.stderr


def patch_all(monkeypatch, failing: tuple[str, ...] = (), real: tuple[str, ...] = ()):
    """Every fetch answers from the recordings, or fails offline (`failing`); `real` ones are left
    as they are (they fail before any request without a key)."""
    for provider, module in MODULES.items():
        if provider in real:
            continue
        fetch = offline(provider) if provider in failing else FETCHED[provider]
        monkeypatch.setattr(module, f"fetch_{provider}", fetch)
    monkeypatch.setattr(refresh_azure, "fetch_azure", offline("azure"))
    monkeypatch.setattr(refresh_aws, "fetch_aws_offer_file", offline("aws"))
    monkeypatch.setattr(refresh_aws, "aws_spot_prices", lambda *a, **k: None)


def test_catalog_refresh_all_writes_a_folder_and_says_why_not(
    run, tmp_path, monkeypatch
):
    patch_all(monkeypatch, failing=("cudo",), real=("lambda",))
    folder = tmp_path / "prices"
    result = run("catalog", "refresh", "all", "-o", folder)
    assert result.exit_code == 0, result.output
    lines = dict(line.split(": ", 1) for line in result.stdout.splitlines())
    assert sorted(lines) == sorted({*shipped_catalog_names(), *PRICE_APIS})
    for provider in ("gcp", "runpod", "vast", "do", "hyperbolic", "fluidstack"):
        assert lines[provider].startswith("wrote "), (provider, lines[provider])
        assert (folder / f"{provider}.csv").is_file()
        read_offers(folder / f"{provider}.csv", load_gpus(), load_providers())
    assert lines["lambda"] == (
        "not refreshed: no Lambda Cloud API key: set LAMBDA_API_KEY "
        "(or save it in ~/.lambda_cloud/lambda_keys)"
    )
    assert lines["cudo"].startswith("not refreshed: cannot reach the cudo API")
    assert lines["aws"].startswith("not refreshed: cannot reach")
    for provider in NO_PRICE_API:
        assert lines[provider].startswith("not refreshed: no public price API")
        assert "planner catalog import" in lines[provider]
    assert not (folder / "lambda.csv").exists() and not (folder / "nebius.csv").exists()
    # the folder's CSVs are catalogs a scenario can name together
    catalog = load_catalog(
        [str(folder / f"{p}.csv") for p in ("gcp", "runpod", "vast")]
    )
    assert {"gcp", "runpod", "vast"} == set(catalog.offers.provider)


def test_catalog_refresh_all_replaces_only_its_own_outputs(run, tmp_path, monkeypatch):
    patch_all(monkeypatch)
    folder = tmp_path / "prices"
    folder.mkdir()
    mine = folder / "vast.csv"
    mine.write_text(
        "provider,region,instance_type,gpu,gpus_per_node\n"
    )  # the user's own
    assert run("catalog", "refresh", "all", "-o", folder).exit_code == 0
    assert mine.read_text() == "provider,region,instance_type,gpu,gpus_per_node\n"
    before = (folder / "gcp.csv").read_bytes()
    result = run(
        "catalog", "refresh", "all", "-o", folder
    )  # a second run replaces its own
    assert result.exit_code == 0
    assert (
        "vast: not refreshed: " in result.stdout
        and "is not a `catalog refresh` output" in result.stdout
    )
    assert (folder / "gcp.csv").read_bytes() == before


def test_catalog_refresh_all_with_nothing_refreshed_exits_2_with_one_line(
    run, tmp_path, monkeypatch
):
    patch_all(monkeypatch, failing=tuple(MODULES))
    folder = tmp_path / "prices"
    result = run("catalog", "refresh", "all", "-o", folder)
    assert result.exit_code == 2
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert errors == [
        f"error: {folder}: no provider's prices were refreshed (see the lines above)"
    ]
    assert len(result.stdout.splitlines()) == len(
        {*shipped_catalog_names(), *PRICE_APIS}
    )
    assert list(folder.iterdir()) == []


def test_catalog_refresh_all_into_a_file_is_refused(run, tmp_path):
    target = tmp_path / "afile"
    target.write_text("x")
    result = run("catalog", "refresh", "all", "-o", target)
    assert result.exit_code == 2 and "is not a folder" in result.stderr
    assert target.read_text() == "x"


# ---------------------------------------------------------------- the stale-price warning


def test_stale_warning_names_refresh_and_import_per_provider():
    catalog = load_catalog(["aws", "gcp", "runpod", "paperspace"])
    as_of = catalog.prices_as_of()
    line = price_age_warning(catalog, today=date.fromordinal(as_of.toordinal() + 523))
    assert line == (
        f"prices as of {as_of.isoformat()} are 523 days old; refresh them: "
        "planner catalog refresh aws|gcp|runpod (or planner catalog import for paperspace)"
    )
    only_import = load_catalog(["nebius"])
    assert price_age_warning(only_import, today=date(2030, 1, 1)).endswith(
        "refresh them: planner catalog import for nebius"
    )


def test_stale_warning_skips_fresh_catalogs(tmp_path, gpus):
    fresh = tmp_path / "lambda-today.csv"
    write_offers_csv(PARSED["lambda"](gpus), fresh, source="s", as_of="2029-12-01")
    catalog = load_catalog(["aws", str(fresh)])
    line = price_age_warning(catalog, today=date(2030, 1, 1))
    assert line.endswith("refresh them: planner catalog refresh aws")
