//! Indonesian (`id`): the default pages' texts.

use crate::response::Texts;

/// The texts in Indonesian.
pub(super) fn texts() -> Texts {
    let s = |s: &str| s.to_owned();
    Texts {
        lang: s("id"),
        eyebrow: s("Ruang tunggu"),
        waiting_title: s("Anda sedang dalam antrean"),
        position: s("Anda nomor {position} dalam antrean"),
        ahead_label: s("Di depan Anda"),
        waiting_label: s("Dalam antrean"),
        eta_label: s("Perkiraan waktu tunggu"),
        eta_almost_there: s("Sebentar lagi"),
        eta_minutes: s("Sekitar {minutes} menit"),
        eta_hours: s("Sekitar {hours} jam {minutes} menit"),
        eta_unknown: s("Tidak diketahui: sudah beberapa menit tidak ada yang dipersilakan masuk"),
        auto_update: s(
            "Halaman ini diperbarui otomatis. Biarkan tetap terbuka: saat giliran Anda tiba, \
             halaman ini akan membawa Anda masuk.",
        ),
        error: s("Ruang tunggu tidak dapat dijangkau. Mencoba lagi dalam {seconds} detik."),
        letting_in: s("Giliran Anda tiba. Membawa Anda masuk\u{2026}"),
        leave_button: s("Keluar dari antrean"),
        left_title: s("Anda telah keluar dari antrean"),
        left_message: s("Tempat Anda telah dilepas, jadi antrean berlanjut tanpa Anda."),
        back_to_site: s("Kembali ke situs"),
        gone_title: s("Anda tidak lagi dalam antrean"),
        gone_message: s("Tempat Anda telah dilepas (mungkin di tab lain) atau sudah kedaluwarsa."),
        rejoin: s("Masuk antrean lagi"),
        eta_estimating: s("Memperkirakan\u{2026}"),
        eta_range: s("{low}–{high} menit"),
        eta_paused: s("Dijeda: antrean akan segera bergerak lagi"),
        closed_title: s("Penjualan ditutup"),
        closed_message: s(
            "Penjualan sedang tidak dibuka. Jika Anda tadi dalam antrean, tempat Anda tetap \
             tersimpan selama halaman ini terbuka; halaman ini akan memeriksa lagi secara otomatis.",
        ),
        banned_title: s("Anda tidak dapat masuk"),
        banned_message: s("Pengelola situs telah mengakhiri kunjungan Anda."),
        refused_title: s("Kami tidak dapat mengizinkan Anda masuk"),
        refused_message: s(
            "Saat ini situs ini tidak menerima pengunjung dari jaringan atau perangkat lunak Anda. \
             Jika Anda memakai browser biasa, coba lagi dari jaringan lain (bukan VPN atau \
             jaringan penyedia hosting).",
        ),
        full_title: s("Antrean penuh"),
        full_message: s(
            "Begitu banyak orang menunggu sehingga antrean penuh. Halaman ini akan segera mencoba \
             lagi secara otomatis.",
        ),
        unavailable_title: s("Silakan coba beberapa saat lagi"),
        unavailable_message: s(
            "Ruang tunggu tidak dapat dijangkau saat ini. Halaman ini akan mencoba lagi secara \
             otomatis.",
        ),
        busy_title: s("Sedang sangat ramai"),
        busy_message: s("Ruang tunggu sedang sangat ramai. Halaman ini akan segera mencoba lagi."),
        limited_title: s("Terlalu banyak permintaan"),
        limited_message: s(
            "Koneksi Anda mengirim lebih banyak permintaan daripada yang diizinkan ruang tunggu. \
             Halaman ini akan segera mencoba lagi secara otomatis.",
        ),
        challenge_title: s("Memeriksa browser Anda"),
        challenge_message: s(
            "Sebelum Anda masuk antrean, browser Anda memecahkan teka-teki kecil yang mencegah bot \
             mengambil tempat. Ini butuh beberapa detik; biarkan halaman ini tetap terbuka.",
        ),
        challenge_unsupported: s(
            "Browser Anda tidak dapat melakukan pemeriksaan ini di sini: diperlukan JavaScript dan \
             koneksi aman (https).",
        ),
        try_again: s("Coba lagi sekarang"),
        thousands_separator: s("."),
        grouping_from: 1_000,
        digits: s("0123456789"),
        dir: s("ltr"),
        scheduled_title: s("Penjualan segera dibuka"),
        scheduled_message: s(
            "Anda sudah terdaftar. Saat dibuka, semua yang terdaftar sebelumnya mendapat tempat \
             dalam antrean dengan urutan acak, jadi datang lebih awal tidak memberi keuntungan dan \
             memuat ulang tidak mengubah apa pun. Biarkan halaman ini tetap terbuka: halaman ini \
             akan masuk antrean secara otomatis.",
        ),
        scheduled_countdown: s("Dibuka dalam {time}"),
    }
}
