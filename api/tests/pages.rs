//! The visitor's pages as a browser gets them: a page (never JSON) for a mistyped room, for a
//! network that sent too many requests, and for a closed room with its way onward; the
//! language a visitor picks, kept by the page's own links and forms.

mod common;

use common::*;
use reqwest::{Method, StatusCode};
use serde_json::json;

const HTML: &str = "text/html,application/xhtml+xml";

async fn page(
    c: &Cluster,
    path: &str,
    lang: &str,
) -> (StatusCode, String, reqwest::header::HeaderMap) {
    let r = no_redirect()
        .get(c.node(1).url(path))
        .header("accept", HTML)
        .header("accept-language", lang)
        .send()
        .await
        .unwrap();
    let (s, h) = (r.status(), r.headers().clone());
    (s, r.text().await.unwrap(), h)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mistyped_room_and_a_bad_name_get_a_page_that_says_so_not_closed() {
    let c = Cluster::start(1).await;
    c.create_room("shop", room_config(5)).await;
    for path in ["/wait/shpo?next=/cart", "/wait/Bad%20Name"] {
        let (s, html, h) = page(&c, path, "de").await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{path}: {html}");
        assert!(h["content-type"].to_str().unwrap().starts_with("text/html"));
        assert!(html.contains("keinen Warteraum"), "{path}: {html}");
        assert!(
            !html.contains("geschlossen"),
            "a typo must not read as closed: {html}"
        );
        assert!(html.contains("href=\"/\""), "a way back: {html}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_requests_from_a_browser_get_a_page_that_retries_by_itself() {
    let c = Cluster::start_with(
        1,
        "[limits]\nvisitor_requests_per_second = 1\nvisitor_burst = 2\n",
    )
    .await;
    c.create_room("shop", room_config(5)).await;
    let mut last = (StatusCode::OK, String::new(), Default::default());
    for _ in 0..6 {
        last = page(&c, "/wait/shop?lang=fr&next=/", "en").await;
        if last.0 == StatusCode::TOO_MANY_REQUESTS {
            break;
        }
    }
    let (s, html, h) = last;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "{html}");
    assert!(
        h["content-type"].to_str().unwrap().starts_with("text/html"),
        "a page, not JSON"
    );
    let retry: u64 = h["retry-after"].to_str().unwrap().parse().unwrap();
    assert!(
        html.contains(&format!("http-equiv=\"refresh\" content=\"{retry}\"")),
        "{html}"
    );
    assert!(html.contains("lang=\"fr\""), "the picked language: {html}");
    assert!(html.contains("requêtes"), "{html}");
    // A script (JSON) still gets JSON.
    let r = c
        .http
        .post(c.node(1).url("/v1/rooms/shop/join"))
        .send()
        .await
        .unwrap();
    if r.status() == StatusCode::TOO_MANY_REQUESTS {
        let v: serde_json::Value = r.json().await.unwrap();
        assert_eq!(v["error"]["code"], "rate_limited");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_room_sends_visitors_onward_and_a_picked_language_stays() {
    let c = Cluster::start(1).await;
    let mut config = room_config(5);
    config["line"] = json!({"after_url": "https://shop.example/sold-out"});
    c.create_room("shop", config.clone()).await;
    // The language picked by the visitor wins over the browser's, and the page's forms and
    // language links carry it on (before next=, which stays last and raw).
    let (s, html, _) = page(&c, "/wait/shop?lang=ja&next=/cart?lang=de", "de").await;
    assert_eq!(s, StatusCode::OK, "{html}");
    assert!(html.contains("<html lang=\"ja\""), "{html}");
    assert!(
        html.contains("action=\"/wait/shop?lang=ja&amp;next=/cart?lang=de\""),
        "{html}"
    );
    assert!(html.contains("hreflang=\"fr\""), "the switcher: {html}");
    assert_eq!(html.matches("aria-current=\"true\"").count(), 1, "{html}");
    // A `next` without a query of its own ends at its `&`: a `lang` after it is the page's,
    // and `next` is the path alone (it took the rest of the query before).
    let (s, html, _) = page(&c, "/wait/shop?next=/demo&lang=de", "en").await;
    assert_eq!(s, StatusCode::OK, "{html}");
    assert!(html.contains("<html lang=\"de\""), "{html}");
    assert!(html.contains("data-next=\"/demo\""), "{html}");
    // Joining keeps it: the redirect after the form names it.
    let r = no_redirect()
        .post(c.node(1).url("/wait/shop?lang=ja&next=/cart"))
        .header("accept", HTML)
        .form(&[("altcha", "")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let to = r.headers()["location"].to_str().unwrap();
    assert!(
        to == "/wait/shop?lang=ja&joined=1&next=/cart" || to == "/cart",
        "{to}"
    );
    let cookie = r.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    // Closed: the page links to the organiser's page and back to the site.
    config["closes_at"] = json!(1);
    config["opens_at"] = serde_json::Value::Null;
    let (st, v) = c
        .admin(1, Method::PUT, "/v1/rooms/shop", Some(config))
        .await;
    assert!(st.is_success(), "{v}");
    // A visitor who still holds a place keeps it (closing refuses newcomers only).
    let r = no_redirect()
        .get(c.node(1).url("/wait/shop?next=/cart"))
        .header("accept", HTML)
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::SEE_OTHER,
        "admitted, on to the shop"
    );
    assert_eq!(r.headers()["location"], "/cart");
    let (s, closed, _) = page(&c, "/wait/shop?next=/cart", "en").await;
    assert_eq!(s, StatusCode::FORBIDDEN, "no join offered: {closed}");
    assert!(!closed.contains("id=\"join\""), "{closed}");
    assert!(
        closed.contains("href=\"https://shop.example/sold-out\""),
        "{closed}"
    );
    assert!(closed.contains("What happens next"), "{closed}");
    assert!(closed.contains("Back to the site"), "{closed}");
    // A link that is not a plain URL is refused, naming its field.
    let mut bad = room_config(5);
    bad["line"] = json!({"after_url": "javascript:alert(1)"});
    let (st, v) = c.admin(1, Method::PUT, "/v1/rooms/shop", Some(bad)).await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error"]["field"], "line.after_url", "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dark_page_needs_a_light_text_and_the_page_wears_it() {
    let c = Cluster::start(1).await;
    let mut config = room_config(1);
    config["branding"] = json!({"background_color": "#102030", "accent_color": "#ffd54f"});
    let (s, v) = c
        .admin(1, Method::PUT, "/v1/rooms/night", Some(config.clone()))
        .await;
    assert_eq!(
        s,
        StatusCode::BAD_REQUEST,
        "near-black text on a dark page: {v}"
    );
    assert_eq!(v["error"]["field"], "branding.background_color", "{v}");
    config["branding"]["text_color"] = json!("#f5f5f5");
    c.create_room("night", config.clone()).await;
    let (_, room) = c
        .admin(1, Method::GET, "/v1/rooms/night?consistent=true", None)
        .await;
    assert_eq!(
        room["config"]["branding"]["text_color"], "#f5f5f5",
        "{room}"
    );
    c.join(1, "night", None).await;
    let (_, html, _) = page(&c, "/wait/night?next=/", "en").await;
    assert!(html.contains("--bg:#102030;--fg:#f5f5f5;"), "{html}");
    for (text, field) in [
        ("#12", "branding.text_color"),
        ("#2a2a2a", "branding.text_color"),
    ] {
        let mut bad = config.clone();
        bad["branding"]["text_color"] = json!(text);
        let (s, v) = c.admin(1, Method::PUT, "/v1/rooms/night", Some(bad)).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{text}: {v}");
        assert_eq!(v["error"]["field"], field, "{text}: {v}");
    }
}
