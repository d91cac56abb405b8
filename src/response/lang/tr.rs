//! Turkish (`tr`): the default pages' texts.

use crate::response::Texts;

/// The texts in Turkish.
pub(super) fn texts() -> Texts {
    let s = |s: &str| s.to_owned();
    Texts {
        lang: s("tr"),
        eyebrow: s("Bekleme odası"),
        waiting_title: s("Sıradasınız"),
        position: s("Sıra numaranız {position}"),
        ahead_label: s("Önünüzde"),
        waiting_label: s("Sırada"),
        eta_label: s("Tahmini bekleme"),
        eta_almost_there: s("Sıra neredeyse sizde"),
        eta_minutes: s("Yaklaşık {minutes} dakika"),
        eta_hours: s("Yaklaşık {hours} saat {minutes} dakika"),
        eta_unknown: s("Bilinmiyor: birkaç dakikadır kimse içeri alınmadı"),
        auto_update: s(
            "Bu sayfa kendiliğinden güncellenir. Açık tutun: sıranız geldiğinde sizi içeri alır.",
        ),
        error: s("Bekleme odasına ulaşılamıyor. {seconds} saniye sonra yeniden denenecek."),
        letting_in: s("Sıra sizde. İçeri alınıyorsunuz\u{2026}"),
        leave_button: s("Sıradan çık"),
        left_title: s("Sıradan çıktınız"),
        left_message: s("Yeriniz bırakıldı, bu yüzden sıra sizsiz ilerliyor."),
        back_to_site: s("Siteye dön"),
        gone_title: s("Artık sırada değilsiniz"),
        gone_message: s("Yeriniz bırakıldı (belki başka bir sekmede) ya da süresi doldu."),
        rejoin: s("Yeniden sıraya gir"),
        eta_estimating: s("Hesaplanıyor\u{2026}"),
        eta_range: s("{low}–{high} dakika"),
        eta_paused: s("Duraklatıldı: sıra yakında yeniden ilerleyecek"),
        closed_title: s("Satış kapalı"),
        closed_message: s(
            "Satış şu anda açık değil. Sıradaysanız, bu sayfa açık kaldıkça yerinizi korursunuz; \
             sayfa kendiliğinden yeniden kontrol eder.",
        ),
        banned_title: s("İçeri giremezsiniz"),
        banned_message: s("Site yöneticileri ziyaretinizi sonlandırdı."),
        refused_title: s("Sizi içeri alamıyoruz"),
        refused_message: s(
            "Bu site şu anda ağınızdan veya yazılımınızdan gelen ziyaretçileri kabul etmiyor. \
             Normal bir tarayıcı kullanıyorsanız başka bir ağdan yeniden deneyin (VPN ya da bir \
             barındırma sağlayıcısının ağı olmasın).",
        ),
        full_title: s("Sıra dolu"),
        full_message: s(
            "O kadar çok kişi bekliyor ki sıra doldu. Bu sayfa birazdan kendiliğinden yeniden \
             dener.",
        ),
        unavailable_title: s("Lütfen birazdan yeniden deneyin"),
        unavailable_message: s(
            "Bekleme odasına şu anda ulaşılamıyor. Bu sayfa kendiliğinden yeniden dener.",
        ),
        busy_title: s("Şu anda çok yoğun"),
        busy_message: s("Bekleme odası çok yoğun. Bu sayfa birazdan yeniden dener."),
        limited_title: s("Çok fazla istek"),
        limited_message: s(
            "Bağlantınız, bekleme odasının izin verdiğinden fazla istek gönderdi. Bu sayfa \
             birazdan kendiliğinden yeniden dener.",
        ),
        challenge_title: s("Tarayıcınız kontrol ediliyor"),
        challenge_message: s(
            "Siz sıraya girmeden önce tarayıcınız, botların yer kapmasını önleyen küçük bir \
             bulmacayı çözer. Bu birkaç saniye sürer; bu sayfayı açık tutun.",
        ),
        challenge_unsupported: s(
            "Tarayıcınız bu kontrolü burada yapamıyor: JavaScript ve güvenli (https) bir bağlantı \
             gerekir.",
        ),
        try_again: s("Şimdi yeniden dene"),
        thousands_separator: s("."),
        grouping_from: 1_000,
        digits: s("0123456789"),
        dir: s("ltr"),
        scheduled_title: s("Satış yakında başlıyor"),
        scheduled_message: s(
            "Kaydınız alındı. Açılışta, önceden kaydolan herkes rastgele bir düzenle sırada yer \
             alır; bu yüzden erken gelmek avantaj sağlamaz, sayfayı yenilemek de hiçbir şeyi \
             değiştirmez. Bu sayfayı açık tutun: sıraya kendiliğinden girer.",
        ),
        scheduled_countdown: s("{time} sonra açılıyor"),
    }
}
