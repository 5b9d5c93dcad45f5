from memvm import __version__


async def test_health_reports_version_and_ok(client):
    response = await client.get("/v1/health/")

    assert response.status_code == 200
    assert response.json() == {"version": __version__, "status": "ok"}
