//! The visitor's pages as a browser gets them: a page (never JSON) for a mistyped room, for a
//! network that sent too many requests, and for a closed room with its way onward; the
//! language a visitor picks, kept by the page's own links and forms; a room's own page
//! template, on every node, and the templates refused.

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

/// A brand's own page: its markup around the page's parts, a block per language, and things a
/// template may not do (an inline script, which the page's policy forbids).
const TEMPLATE: &str = r#"<div class="shop"><header><strong>{{ title }}</strong> · {{ room|upper }}</header>
{% if lang == "de" %}<p class="say">Gleich geht es los.</p>{% elif lang == "fr" %}<p class="say">Ça commence bientôt.</p>{% else %}<p class="say">Starting soon.</p>{% endif %}
<h1>{{ heading }}</h1>{{ notice }}{{ position }}{{ estimate }}{{ progress }}{{ join_form }}
<script>document.title = "inline"</script><footer>{{ switcher }}</footer></div>"#;

async fn with_cookie(
    c: &Cluster,
    node: u64,
    path: &str,
    room: &str,
    ticket: &str,
    lang: &str,
) -> (StatusCode, String, reqwest::header::HeaderMap) {
    let r = no_redirect()
        .get(c.node(node).url(path))
        .header("accept", HTML)
        .header("accept-language", lang)
        .header("cookie", format!("sluice_ticket_{room}={ticket}"))
        .send()
        .await
        .unwrap();
    let (s, h) = (r.status(), r.headers().clone());
    (s, r.text().await.unwrap(), h)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_wears_its_own_page_template_on_every_node_and_bad_templates_are_refused() {
    let c = Cluster::start(3).await;
    let mut config = room_config(1);
    config["branding"] = json!({"title": "<Drop> & Co", "template": TEMPLATE});
    c.create_room("drop", config.clone()).await;
    let (_, room) = c
        .admin(1, Method::GET, "/v1/rooms/drop?consistent=true", None)
        .await;
    assert_eq!(room["config"]["branding"]["template"], TEMPLATE, "{room}");
    // One visitor in, one waiting.
    c.join(1, "drop", None).await;
    let waiter = c.join(1, "drop", None).await;
    assert_eq!(waiter["state"], "waiting", "{waiter}");
    let ticket = waiter["ticket"].as_str().unwrap();
    // Every node shows the room's page, from its own replica of the room.
    for node in 1..=3 {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let (s, html, h) = loop {
            let got = with_cookie(&c, node, "/wait/drop?next=/cart", "drop", ticket, "de").await;
            if got.1.contains("class=\"shop\"") || std::time::Instant::now() > deadline {
                break got;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        };
        assert_eq!(s, StatusCode::OK, "node {node}: {html}");
        assert!(
            html.contains("Gleich geht es los.") && !html.contains("Starting soon"),
            "{html}"
        );
        // Values escaped; the parts whole, with the ids the page's script follows.
        assert!(
            html.contains("<strong>&lt;Drop&gt; &amp; Co</strong> · DROP"),
            "{html}"
        );
        for id in [
            "notice",
            "details",
            "pos",
            "estimate",
            "eta",
            "prog",
            "updated",
            "say",
            "sluice-wait",
        ] {
            assert_eq!(
                html.matches(&format!("id=\"{id}\"")).count(),
                1,
                "{id}: {html}"
            );
        }
        assert!(
            html.contains("<script src=\"/assets/wait.js\" defer></script>"),
            "{html}"
        );
        assert!(html.contains("<html lang=\"de\">"), "{html}");
        // The inline script is on the page, and the page's policy forbids it.
        let csp = h["content-security-policy"].to_str().unwrap();
        assert!(
            csp.contains("script-src 'self';") && !csp.contains("unsafe-eval"),
            "{csp}"
        );
        assert!(
            !csp.split(';')
                .any(|d| d.contains("script-src") && d.contains("unsafe-inline")),
            "{csp}"
        );
    }
    // The join page, in French, with the form in the brand's page.
    let (s, html, _) = page(&c, "/wait/drop?next=/cart", "fr").await;
    assert_eq!(s, StatusCode::OK, "{html}");
    assert!(
        html.contains("Ça commence bientôt.") && html.contains("id=\"join\""),
        "{html}"
    );
    assert!(!html.contains("id=\"pos\""), "{html}");
    // Templates that would not make a working page, or do what a template may not: refused
    // with the field and the line, and the room keeps its page.
    let long = format!("{TEMPLATE}{}", " ".repeat(16_384));
    for (bad, says) in [
        (TEMPLATE.replace("{{ estimate }}", ""), "estimate"),
        (TEMPLATE.replace("{{ join_form }}", ""), "join_form"),
        (
            format!("{{% include \"/etc/passwd\" %}}{TEMPLATE}"),
            "include",
        ),
        (
            format!("{TEMPLATE}\n{{% for x in room %}}{{{{ x }}}}{{% endfor %}}"),
            "line 5",
        ),
        (format!("{TEMPLATE}{{{{ room * 100000 }}}}"), "*"),
        (format!("{TEMPLATE}{{{{ secret }}}}"), "secret"),
        (format!("{TEMPLATE}{{% if %}}"), "line 4"),
        (long, "16384"),
    ] {
        let mut cfg = config.clone();
        cfg["branding"]["template"] = json!(bad);
        let (s, v) = c.admin(1, Method::PUT, "/v1/rooms/drop", Some(cfg)).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{says}: {v}");
        assert_eq!(v["error"]["code"], "invalid_field", "{v}");
        assert_eq!(v["error"]["field"], "branding.template", "{v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(says),
            "{says}: {v}"
        );
    }
    let (s, html, _) = with_cookie(&c, 1, "/wait/drop", "drop", ticket, "en").await;
    assert_eq!(s, StatusCode::OK);
    assert!(html.contains("Starting soon."), "the page kept: {html}");
    // Struck, the built-in page is back.
    config["branding"]["template"] = serde_json::Value::Null;
    c.create_room("drop", config).await;
    let (_, html, _) = with_cookie(&c, 1, "/wait/drop", "drop", ticket, "en").await;
    assert!(
        !html.contains("class=\"shop\"") && html.contains("id=\"eta\""),
        "{html}"
    );
    // Over gRPC too: a template is set, read back, and refused like over HTTP.
    use sluice_grpc::pb;
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", c.node(1).grpc))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut admin = pb::admin_client::AdminClient::new(channel);
    let put = |template: &str| {
        let mut req = tonic::Request::new(pb::PutRoomRequest {
            room: "grpc".into(),
            config: Some(pb::RoomConfig {
                capacity: 1,
                branding: Some(pb::Branding {
                    template: Some(template.into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            create_only: false,
        });
        req.metadata_mut()
            .insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
        req
    };
    let room = admin
        .put_room(put(TEMPLATE))
        .await
        .unwrap()
        .into_inner()
        .room
        .unwrap();
    assert_eq!(
        room.config.unwrap().branding.unwrap().template.as_deref(),
        Some(TEMPLATE)
    );
    let refused = admin.put_room(put("{{ position }}")).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
    assert!(
        refused.message().contains("invalid_field") && refused.message().contains("notice"),
        "{refused:?}"
    );
}

/// A sale in phases as a waiter sees it: the next announced phase and its time on the page
/// before it starts, then the next one after; an unannounced phase is not told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_is_told_the_next_drop_of_a_sale_in_phases() {
    let c = Cluster::start(1).await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut config = room_config(1);
    config["phases"] = json!([
        {"starts_at": now + 2, "name": "Public <sale>", "capacity": 1, "announce": true},
        {"starts_at": now + 3_600, "name": "Secret", "capacity": 2},
        {"starts_at": now + 7_200, "name": "Second drop", "capacity": 3, "announce": true,
         "template": TEMPLATE},
    ]);
    c.create_room("drops", config).await;
    c.join(1, "drops", None).await;
    let waiter = c.join(1, "drops", None).await;
    let ticket = waiter["ticket"].as_str().unwrap();
    let (_, html, _) = with_cookie(&c, 1, "/wait/drops", "drops", ticket, "en").await;
    assert!(
        html.contains(
            "id=\"next-phase\">Next: <strong>Public &lt;sale&gt;</strong>, <time datetime="
        ),
        "{html}"
    );
    // After its start the next one told is the second drop (the secret one is passed over),
    // and the page is still the built-in one (the second drop's own page is for later).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let html = loop {
        let (_, html, _) = with_cookie(&c, 1, "/wait/drops", "drops", ticket, "en").await;
        if !html.contains("Public") {
            break html;
        }
        assert!(std::time::Instant::now() < deadline, "{html}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert!(
        html.contains("Next: <strong>Second drop</strong>"),
        "{html}"
    );
    assert!(
        !html.contains("Secret") && !html.contains("class=\"shop\""),
        "{html}"
    );
    // A phase's template is checked like the room's.
    let mut bad = room_config(1);
    bad["phases"] = json!([{"starts_at": now + 600, "name": "x", "template": "{{ position }}"}]);
    let (s, v) = c.admin(1, Method::PUT, "/v1/rooms/drops2", Some(bad)).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error"]["field"], "phases", "{v}");
}
