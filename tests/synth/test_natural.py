from synth.natural import NaturalConfig, natural_reason, select_natural


def test_selects_by_token_length_source_and_quality(books):
    # real metadata shapes: the novels' JSON lines plus a score a quality stage would write
    docs = []
    for i, b in enumerate(books[:6]):
        meta = {k: v for k, v in b.items() if k != "text"} | {"source": "books"}
        if i % 2:
            meta["dclm_score"] = 0.1 * i
        docs.append((b["id"], len(b["text"]) // 4, meta))
    docs.append(("docs/short", 300, {"source": "python-docs"}))
    cfg = NaturalConfig(min_tokens=1000, quality_key="dclm_score", min_quality=0.25, keep_unscored=True)
    kept, reasons = select_natural(docs, cfg)
    expected = [d[0] for d in docs if d[1] >= 1000 and d[2].get("dclm_score", 1.0) >= 0.25]
    assert kept == expected and 0 < len(kept) < len(docs)
    assert reasons["too_short"] == 1 and reasons["low_quality"] == sum(
        1 for d in docs if d[2].get("dclm_score", 1.0) < 0.25
    )
    strict = cfg.model_copy(update={"keep_unscored": False, "sources": ["books"]})
    assert natural_reason(5000, {"source": "books"}, strict) == "unscored"
    assert natural_reason(5000, {"source": "web"}, strict) == "other_source"
    assert natural_reason(10**6, {}, NaturalConfig(min_tokens=10, max_tokens=1000)) == "too_long"
