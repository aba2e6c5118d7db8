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
};

static DE: Texts = Texts {
    in_line: "Sie sind in der Warteschlange",
    keep_open: "Lassen Sie diese Seite geöffnet. Sie werden automatisch weitergeleitet, sobald Sie an der Reihe sind.",
    your_place: "Ihr Platz in der Warteschlange",
    estimated_wait: "Geschätzte Wartezeit",
    unknown: "unbekannt",
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
};

static FR: Texts = Texts {
    in_line: "Vous êtes dans la file",
    keep_open: "Gardez cette page ouverte : elle vous redirige d'elle-même quand c'est votre tour.",
    your_place: "Votre place dans la file",
    estimated_wait: "Attente estimée",
    unknown: "inconnue",
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
};

static ES: Texts = Texts {
    in_line: "Está en la fila",
    keep_open: "Mantenga esta página abierta: le llevará automáticamente cuando sea su turno.",
    your_place: "Su lugar en la fila",
    estimated_wait: "Espera estimada",
    unknown: "desconocida",
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
