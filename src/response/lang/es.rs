//! Spanish (`es`): the default pages' texts.

use crate::response::Texts;

/// The texts in Spanish.
pub(super) fn texts() -> Texts {
    let s = |s: &str| s.to_owned();
    Texts {
        lang: s("es"),
        eyebrow: s("Sala de espera"),
        waiting_title: s("Estás en la fila"),
        position: s("Eres el número {position} de la fila"),
        ahead_label: s("Delante de ti"),
        waiting_label: s("En la fila"),
        eta_label: s("Espera estimada"),
        eta_almost_there: s("Ya casi es tu turno"),
        eta_minutes: s("Aprox. {minutes} min"),
        eta_hours: s("Aprox. {hours} h {minutes} min"),
        eta_unknown: s("Desconocida: nadie ha podido entrar en los últimos minutos"),
        auto_update: s(
            "Esta página se actualiza sola. Mantenla abierta: cuando sea tu turno, te dejará pasar.",
        ),
        error: s(
            "one:No se puede conectar con la sala de espera. Nuevo intento en {seconds} segundo.\
             |other:No se puede conectar con la sala de espera. Nuevo intento en {seconds} \
             segundos.",
        ),
        letting_in: s("Es tu turno. Entrando\u{2026}"),
        leave_button: s("Salir de la fila"),
        left_title: s("Has salido de la fila"),
        left_message: s("Tu lugar se ha liberado, así que la fila sigue avanzando sin ti."),
        back_to_site: s("Volver al sitio"),
        gone_title: s("Ya no estás en la fila"),
        gone_message: s("Tu lugar se ha liberado (quizá en otra pestaña) o ha caducado."),
        rejoin: s("Volver a la fila"),
        eta_estimating: s("Calculando\u{2026}"),
        eta_range: s("{low}–{high} min"),
        eta_paused: s("En pausa: la fila volverá a avanzar pronto"),
        closed_title: s("La venta está cerrada"),
        closed_message: s(
            "La venta no está abierta en este momento. Si estabas en la fila, conservas tu lugar \
             mientras esta página siga abierta; volverá a comprobarlo sola.",
        ),
        banned_title: s("No puedes entrar"),
        banned_message: s("Los responsables del sitio han finalizado tu visita."),
        refused_title: s("No podemos dejarte entrar"),
        refused_message: s(
            "Este sitio no acepta visitantes desde tu red o tu software en este momento. Si usas \
             un navegador normal, vuelve a intentarlo desde otra red (que no sea una VPN ni la de \
             un proveedor de alojamiento).",
        ),
        full_title: s("La fila está llena"),
        full_message: s(
            "Hay tanta gente esperando que la fila está llena. Esta página volverá a intentarlo \
             sola en un momento.",
        ),
        unavailable_title: s("Vuelve a intentarlo pronto"),
        unavailable_message: s(
            "No se puede conectar con la sala de espera en este momento. Esta página volverá a \
             intentarlo sola.",
        ),
        busy_title: s("Mucha demanda en este momento"),
        busy_message: s(
            "La sala de espera está muy ocupada. Esta página volverá a intentarlo en un momento.",
        ),
        limited_title: s("Demasiadas solicitudes"),
        limited_message: s(
            "Tu conexión ha enviado más solicitudes de las que permite la sala de espera. Esta \
             página volverá a intentarlo sola en un momento.",
        ),
        challenge_title: s("Comprobando tu navegador"),
        challenge_message: s(
            "Antes de que entres en la fila, tu navegador resuelve un pequeño reto que impide que \
             los bots ocupen lugares. Tarda unos segundos; mantén esta página abierta.",
        ),
        challenge_unsupported: s(
            "Tu navegador no puede hacer esta comprobación aquí: necesita JavaScript y una \
             conexión segura (https).",
        ),
        try_again: s("Volver a intentarlo ahora"),
        thousands_separator: s("."),
        grouping_from: 10_000,
        digits: s("0123456789"),
        dir: s("ltr"),
        scheduled_title: s("La venta abre pronto"),
        scheduled_message: s(
            "Te has registrado. En la apertura, todas las personas registradas antes reciben un \
             lugar en la fila en orden aleatorio, así que llegar antes no da ventaja y recargar no \
             cambia nada. Mantén esta página abierta: entrará en la fila sola.",
        ),
        scheduled_countdown: s("Abre en {time}"),
    }
}
