//! The waiting page's words in English, German, French and Spanish, chosen by `Accept-Language`.

/// A supported language.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    /// English (the default).
    En,
    /// German.
    De,
    /// French.
    Fr,
    /// Spanish.
    Es,
}

impl Lang {
    /// The BCP 47 tag.
    pub fn tag(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::De => "de",
            Lang::Fr => "fr",
            Lang::Es => "es",
        }
    }

    /// The best match for an `Accept-Language` header (quality values honoured).
    pub fn negotiate(header: Option<&str>) -> Lang {
        let mut best = (Lang::En, 0.0f32);
        for part in header.unwrap_or("").split(',').take(32) {
            let mut it = part.trim().split(';');
            let tag = it.next().unwrap_or("").trim().to_ascii_lowercase();
            let q = it
                .find_map(|p| {
                    p.trim()
                        .strip_prefix("q=")
                        .and_then(|q| q.parse::<f32>().ok())
                })
                .unwrap_or(1.0);
            let lang = match tag.split('-').next().unwrap_or("") {
                "en" => Lang::En,
                "de" => Lang::De,
                "fr" => Lang::Fr,
                "es" => Lang::Es,
                _ => continue,
            };
            if q > best.1 {
                best = (lang, q);
            }
        }
        best.0
    }
}

/// The texts of the waiting page.
#[derive(Debug)]
pub struct Texts {
    /// Heading while waiting.
    pub in_line: &'static str,
    /// Advice to keep the page open.
    pub keep_open: &'static str,
    /// Label of the position.
    pub your_place: &'static str,
    /// Label of the ETA.
    pub estimated_wait: &'static str,
    /// An ETA that cannot be given.
    pub unknown: &'static str,
    /// Explanation of lottery mode.
    pub lottery: &'static str,
    /// Label of the number of people waiting.
    pub people_waiting: &'static str,
    /// Before a shuffled opening: places are drawn at the opening.
    pub drawn_at_open: &'static str,
    /// Countdown label before opening.
    pub opens_in: &'static str,
    /// The room is closed.
    pub closed: &'static str,
    /// The room takes no newcomers.
    pub not_taking: &'static str,
    /// The line is full.
    pub full: &'static str,
    /// The place ended.
    pub ended: &'static str,
    /// Button to join again.
    pub rejoin: &'static str,
    /// Admitted.
    pub your_turn: &'static str,
    /// Link to continue.
    pub continue_: &'static str,
    /// Heading of error pages.
    pub sorry: &'static str,
    /// Label of the progress bar.
    pub progress: &'static str,
    /// Busy / try again.
    pub busy: &'static str,
    /// Heading of the page that asks the visitor to join.
    pub join_title: &'static str,
    /// What joining does.
    pub join_intro: &'static str,
    /// The button that joins.
    pub join_button: &'static str,
    /// Joined, but the browser kept no cookie.
    pub cookies_blocked: &'static str,
    /// This network holds its share of places.
    pub place_limit: &'static str,
    /// The browser is solving the room's proof-of-work.
    pub pow_working: &'static str,
    /// The room asks a proof-of-work, which needs JavaScript (and a secure connection).
    pub challenge_needs_script: &'static str,
    /// The proof-of-work did not verify.
    pub challenge_invalid: &'static str,
    /// The room is for the shop's signed-in customers, and this visitor brought no (valid)
    /// assertion.
    pub identity_required: &'static str,
    /// Label of the access-code field.
    pub code_label: &'static str,
    /// The button that redeems a code.
    pub code_button: &'static str,
    /// Invitation to redeem a code while waiting.
    pub code_have: &'static str,
    /// The room is by invitation only.
    pub invite_only: &'static str,
    /// The code is not valid here.
    pub code_invalid: &'static str,
    /// The code has been used.
    pub code_used_up: &'static str,
    /// The code has expired.
    pub code_expired: &'static str,
    /// Label of the visitor's lane.
    pub your_lane: &'static str,
    /// Label of the waiters in the lanes before the visitor's.
    pub ahead_in_lanes: &'static str,
    /// Heading of the staff entry page.
    pub staff_title: &'static str,
    /// What the staff entry page does ({room} is replaced by the room).
    pub staff_intro: &'static str,
    /// Label of the staff token field.
    pub staff_token: &'static str,
    /// The button that enters with a staff token.
    pub staff_enter: &'static str,
    /// A staff token that does not let its holder in (the reason follows).
    pub staff_refused: &'static str,
    /// Why the wait is unknown: the room is paused.
    pub why_paused: &'static str,
    /// Why the wait is unknown: the site is down.
    pub why_origin_down: &'static str,
    /// The visitor's place was lost by not checking in.
    pub away_too_long: &'static str,
}

/// The texts in `lang`.
pub fn texts(lang: Lang) -> &'static Texts {
    match lang {
        Lang::En => &EN,
        Lang::De => &DE,
        Lang::Fr => &FR,
        Lang::Es => &ES,
    }
}

static EN: Texts = Texts {
    in_line: "You are in line",
    keep_open: "Keep this page open. It moves you on by itself when it is your turn.",
    your_place: "Your place in line",
    estimated_wait: "Estimated wait",
    unknown: "unknown",
    people_waiting: "People in line",
    drawn_at_open: "Places are drawn by lot when the room opens: any place shown before then is provisional.",
    lottery: "Visitors are chosen by lottery: everyone waiting has the same chance.",
    opens_in: "Opens in",
    closed: "This room is closed.",
    not_taking: "This room is not taking new visitors right now.",
    full: "The line is full. Please try again in a moment.",
    ended: "Your place in line has ended.",
    rejoin: "Join the line again",
    your_turn: "It is your turn!",
    continue_: "Continue",
    sorry: "Sorry",
    progress: "Progress",
    busy: "We are busy. Please try again in a moment.",
    join_title: "Join the line",
    join_intro: "Press the button to take your place in line. Keep this page open afterwards: it moves you on by itself when it is your turn.",
    join_button: "Join the line",
    cookies_blocked: "Your browser did not keep the cookie that holds your place. Please allow cookies for this site, then press the button again.",
    place_limit: "Your network holds as many places in this line as one network may. Please try again once one of them has ended.",
    pow_working: "Checking your browser before it joins the line. This takes a few seconds; please keep this page open.",
    challenge_needs_script: "This line asks your browser to solve a small puzzle before it gives a place, so that bots cannot take the places of people. That needs JavaScript (and a secure connection): please turn JavaScript on, then join again.",
    challenge_invalid: "The check of your browser did not succeed. Please join again to try once more.",
    identity_required: "This line is for signed-in customers. Please sign in at the shop, then follow its link to the line again.",
    code_label: "Access code",
    code_button: "Use the code",
    code_have: "Have an access code? Enter it to move to the line it is for.",
    invite_only: "This line is by invitation only. Enter the access code from your invitation.",
    code_invalid: "This access code is not valid here. Please check it and try again.",
    code_used_up: "This access code has been used as often as it may be.",
    code_expired: "This access code has expired.",
    your_lane: "Your line",
    ahead_in_lanes: "In the lines before yours",
    staff_title: "Staff entry",
    staff_intro: "Paste the staff bypass token you were given. This browser then passes the waiting room of {room} until the token expires or is revoked; it takes no place in line.",
    staff_token: "Token",
    staff_enter: "Enter",
    staff_refused: "This token does not let you in:",
    why_paused: "The line is paused for the moment, so no waiting time can be given. Your place is kept.",
    why_origin_down: "The site is not taking visitors right now, so no waiting time can be given. Your place is kept.",
    away_too_long: "You were away too long and lost your place in line. Join again to take a new place at its end. On a phone, keep this page open while you wait.",
};

static DE: Texts = Texts {
    in_line: "Sie sind in der Warteschlange",
    keep_open: "Lassen Sie diese Seite geöffnet. Sie werden automatisch weitergeleitet, sobald Sie an der Reihe sind.",
    your_place: "Ihr Platz in der Warteschlange",
    estimated_wait: "Geschätzte Wartezeit",
    unknown: "unbekannt",
    people_waiting: "Personen in der Warteschlange",
    drawn_at_open: "Die Plätze werden bei der Öffnung ausgelost: Jede vorher gezeigte Platzierung ist vorläufig.",
    lottery: "Die Auswahl erfolgt per Losverfahren: Alle Wartenden haben die gleiche Chance.",
    opens_in: "Öffnet in",
    closed: "Dieser Raum ist geschlossen.",
    not_taking: "Dieser Raum nimmt gerade keine neuen Besucher auf.",
    full: "Die Warteschlange ist voll. Bitte versuchen Sie es gleich noch einmal.",
    ended: "Ihr Platz in der Warteschlange ist abgelaufen.",
    rejoin: "Erneut anstellen",
    your_turn: "Sie sind an der Reihe!",
    continue_: "Weiter",
    sorry: "Entschuldigung",
    progress: "Fortschritt",
    busy: "Gerade ist viel los. Bitte versuchen Sie es gleich noch einmal.",
    join_title: "In die Warteschlange",
    join_intro: "Drücken Sie die Schaltfläche, um sich anzustellen. Lassen Sie die Seite danach geöffnet: Sie werden automatisch weitergeleitet, sobald Sie an der Reihe sind.",
    join_button: "Anstellen",
    cookies_blocked: "Ihr Browser hat das Cookie, das Ihren Platz hält, nicht gespeichert. Bitte erlauben Sie Cookies für diese Seite und drücken Sie die Schaltfläche erneut.",
    place_limit: "Ihr Netzwerk hält bereits so viele Plätze in dieser Warteschlange, wie ein Netzwerk halten darf. Bitte versuchen Sie es erneut, sobald einer davon abgelaufen ist.",
    pow_working: "Ihr Browser wird geprüft, bevor er sich anstellt. Das dauert einige Sekunden; bitte lassen Sie die Seite geöffnet.",
    challenge_needs_script: "Diese Warteschlange lässt Ihren Browser eine kleine Rechenaufgabe lösen, bevor sie einen Platz vergibt, damit Bots Menschen keine Plätze wegnehmen. Dafür ist JavaScript nötig (und eine sichere Verbindung): Bitte aktivieren Sie JavaScript und stellen Sie sich erneut an.",
    challenge_invalid: "Die Prüfung Ihres Browsers ist nicht gelungen. Bitte stellen Sie sich erneut an, um es noch einmal zu versuchen.",
    identity_required: "Diese Warteschlange ist für angemeldete Kundinnen und Kunden. Bitte melden Sie sich im Shop an und folgen Sie dann erneut seinem Link zur Warteschlange.",
    code_label: "Zugangscode",
    code_button: "Code einlösen",
    code_have: "Sie haben einen Zugangscode? Geben Sie ihn ein, um in die Warteschlange zu wechseln, für die er gilt.",
    invite_only: "Diese Warteschlange ist nur mit Einladung zugänglich. Geben Sie den Zugangscode aus Ihrer Einladung ein.",
    code_invalid: "Dieser Zugangscode gilt hier nicht. Bitte prüfen Sie ihn und versuchen Sie es erneut.",
    code_used_up: "Dieser Zugangscode wurde so oft verwendet, wie er darf.",
    code_expired: "Dieser Zugangscode ist abgelaufen.",
    your_lane: "Ihre Warteschlange",
    ahead_in_lanes: "In den Warteschlangen vor Ihrer",
    staff_title: "Eingang für Mitarbeitende",
    staff_intro: "Fügen Sie das Umgehungs-Token ein, das Sie erhalten haben. Dieser Browser passiert dann den Warteraum von {room}, bis das Token abläuft oder widerrufen wird; er nimmt keinen Platz in der Warteschlange ein.",
    staff_token: "Token",
    staff_enter: "Eintreten",
    staff_refused: "Dieses Token lässt Sie nicht hinein:",
    why_paused: "Die Warteschlange ist im Moment angehalten, daher lässt sich keine Wartezeit angeben. Ihr Platz bleibt erhalten.",
    why_origin_down: "Die Website nimmt gerade keine Besucher an, daher lässt sich keine Wartezeit angeben. Ihr Platz bleibt erhalten.",
    away_too_long: "Sie waren zu lange weg und haben Ihren Platz in der Warteschlange verloren. Stellen Sie sich erneut an, um einen neuen Platz am Ende zu erhalten. Lassen Sie diese Seite auf dem Telefon geöffnet, während Sie warten.",
};

static FR: Texts = Texts {
    in_line: "Vous êtes dans la file",
    keep_open: "Gardez cette page ouverte : elle vous redirige d'elle-même quand c'est votre tour.",
    your_place: "Votre place dans la file",
    estimated_wait: "Attente estimée",
    unknown: "inconnue",
    people_waiting: "Personnes dans la file",
    drawn_at_open: "Les places sont tirées au sort à l’ouverture : toute place affichée avant est provisoire.",
    lottery: "Les visiteurs sont tirés au sort : chaque personne en attente a la même chance.",
    opens_in: "Ouverture dans",
    closed: "Cette salle est fermée.",
    not_taking: "Cette salle n'accepte pas de nouveaux visiteurs pour le moment.",
    full: "La file est pleine. Veuillez réessayer dans un instant.",
    ended: "Votre place dans la file a expiré.",
    rejoin: "Rejoindre la file",
    your_turn: "C'est votre tour !",
    continue_: "Continuer",
    sorry: "Désolé",
    progress: "Progression",
    busy: "Nous sommes très sollicités. Veuillez réessayer dans un instant.",
    join_title: "Rejoindre la file",
    join_intro: "Appuyez sur le bouton pour prendre votre place dans la file. Gardez ensuite cette page ouverte : elle vous redirige d'elle-même quand c'est votre tour.",
    join_button: "Rejoindre la file",
    cookies_blocked: "Votre navigateur n'a pas gardé le cookie qui retient votre place. Autorisez les cookies pour ce site, puis appuyez à nouveau sur le bouton.",
    place_limit: "Votre réseau détient déjà autant de places dans cette file qu'un réseau le peut. Réessayez quand l'une d'elles aura pris fin.",
    pow_working: "Vérification de votre navigateur avant qu'il rejoigne la file. Cela prend quelques secondes ; gardez cette page ouverte.",
    challenge_needs_script: "Cette file demande à votre navigateur de résoudre un petit calcul avant de donner une place, pour que des robots ne prennent pas la place des personnes. Il faut pour cela JavaScript (et une connexion sécurisée) : activez JavaScript, puis rejoignez à nouveau la file.",
    challenge_invalid: "La vérification de votre navigateur n'a pas abouti. Rejoignez à nouveau la file pour réessayer.",
    identity_required: "Cette file est réservée aux clients connectés. Connectez-vous à la boutique, puis suivez à nouveau son lien vers la file.",
    code_label: "Code d'accès",
    code_button: "Utiliser le code",
    code_have: "Vous avez un code d'accès ? Saisissez-le pour passer dans la file à laquelle il donne droit.",
    invite_only: "Cette file est réservée aux invités. Saisissez le code d'accès de votre invitation.",
    code_invalid: "Ce code d'accès n'est pas valable ici. Vérifiez-le et réessayez.",
    code_used_up: "Ce code d'accès a déjà été utilisé autant de fois que permis.",
    code_expired: "Ce code d'accès a expiré.",
    your_lane: "Votre file",
    ahead_in_lanes: "Dans les files avant la vôtre",
    staff_title: "Entrée du personnel",
    staff_intro: "Collez le jeton de contournement que vous avez reçu. Ce navigateur passe alors la salle d'attente de {room} jusqu'à ce que le jeton expire ou soit révoqué ; il ne prend aucune place dans la file.",
    staff_token: "Jeton",
    staff_enter: "Entrer",
    staff_refused: "Ce jeton ne vous fait pas entrer :",
    why_paused: "La file est en pause pour le moment : aucune durée d'attente ne peut être donnée. Votre place est conservée.",
    why_origin_down: "Le site n'accueille pas de visiteurs pour le moment : aucune durée d'attente ne peut être donnée. Votre place est conservée.",
    away_too_long: "Vous vous êtes absenté trop longtemps et avez perdu votre place. Rejoignez la file pour prendre une nouvelle place à la fin. Sur un téléphone, gardez cette page ouverte pendant l'attente.",
};

static ES: Texts = Texts {
    in_line: "Está en la fila",
    keep_open: "Mantenga esta página abierta: le llevará automáticamente cuando sea su turno.",
    your_place: "Su lugar en la fila",
    estimated_wait: "Espera estimada",
    unknown: "desconocida",
    people_waiting: "Personas en la fila",
    drawn_at_open: "Los puestos se sortean al abrir la sala: cualquier puesto mostrado antes es provisional.",
    lottery:
        "Los visitantes se eligen por sorteo: todos los que esperan tienen la misma oportunidad.",
    opens_in: "Abre en",
    closed: "Esta sala está cerrada.",
    not_taking: "Esta sala no admite nuevos visitantes en este momento.",
    full: "La fila está llena. Vuelva a intentarlo en un momento.",
    ended: "Su lugar en la fila ha terminado.",
    rejoin: "Volver a la fila",
    your_turn: "¡Es su turno!",
    continue_: "Continuar",
    sorry: "Lo sentimos",
    progress: "Progreso",
    busy: "Hay mucha demanda. Vuelva a intentarlo en un momento.",
    join_title: "Entrar en la fila",
    join_intro: "Pulse el botón para ocupar su lugar en la fila. Después mantenga esta página abierta: le llevará automáticamente cuando sea su turno.",
    join_button: "Entrar en la fila",
    cookies_blocked: "Su navegador no guardó la cookie que conserva su lugar. Permita las cookies para este sitio y vuelva a pulsar el botón.",
    place_limit: "Su red ya ocupa tantos lugares en esta fila como puede ocupar una red. Vuelva a intentarlo cuando uno de ellos haya terminado.",
    pow_working: "Comprobando su navegador antes de que entre en la fila. Tarda unos segundos; mantenga esta página abierta.",
    challenge_needs_script: "Esta fila pide a su navegador que resuelva un pequeño cálculo antes de dar un lugar, para que los robots no ocupen los lugares de las personas. Para ello hace falta JavaScript (y una conexión segura): active JavaScript y vuelva a entrar en la fila.",
    challenge_invalid: "La comprobación de su navegador no ha tenido éxito. Vuelva a entrar en la fila para intentarlo de nuevo.",
    identity_required: "Esta fila es para clientes que han iniciado sesión. Inicie sesión en la tienda y vuelva a seguir su enlace a la fila.",
    code_label: "Código de acceso",
    code_button: "Usar el código",
    code_have: "¿Tiene un código de acceso? Escríbalo para pasar a la fila a la que da derecho.",
    invite_only: "Esta fila es solo por invitación. Escriba el código de acceso de su invitación.",
    code_invalid: "Este código de acceso no es válido aquí. Compruébelo e inténtelo de nuevo.",
    code_used_up: "Este código de acceso ya se ha usado tantas veces como se permite.",
    code_expired: "Este código de acceso ha caducado.",
    your_lane: "Su fila",
    ahead_in_lanes: "En las filas antes de la suya",
    staff_title: "Entrada del personal",
    staff_intro: "Pegue el token de acceso que recibió. Este navegador pasará entonces la sala de espera de {room} hasta que el token caduque o sea revocado; no ocupa ningún lugar en la fila.",
    staff_token: "Token",
    staff_enter: "Entrar",
    staff_refused: "Este token no le deja entrar:",
    why_paused: "La fila está en pausa por el momento, así que no se puede dar un tiempo de espera. Su lugar se conserva.",
    why_origin_down: "El sitio no recibe visitantes en este momento, así que no se puede dar un tiempo de espera. Su lugar se conserva.",
    away_too_long: "Estuvo ausente demasiado tiempo y perdió su lugar en la fila. Vuelva a unirse para tomar un nuevo lugar al final. En un teléfono, mantenga esta página abierta mientras espera.",
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_honours_quality_values() {
        assert_eq!(Lang::negotiate(None), Lang::En);
        assert_eq!(Lang::negotiate(Some("de-DE,de;q=0.9,en;q=0.8")), Lang::De);
        assert_eq!(Lang::negotiate(Some("ja, fr;q=0.5, es;q=0.7")), Lang::Es);
        assert_eq!(Lang::negotiate(Some("ja, zh")), Lang::En);
        assert_eq!(Lang::negotiate(Some("fr-CA")), Lang::Fr);
        assert_eq!(Lang::negotiate(Some(&"x,".repeat(10_000))), Lang::En);
    }
}
