//! Japanese (`ja`): the default pages' texts.

use crate::response::Texts;

/// The texts in Japanese.
pub(super) fn texts() -> Texts {
    let s = |s: &str| s.to_owned();
    Texts {
        lang: s("ja"),
        eyebrow: s("待機室"),
        waiting_title: s("列に並んでいます"),
        position: s("あなたの順番は{position}番目です"),
        ahead_label: s("あなたの前"),
        waiting_label: s("待機人数"),
        eta_label: s("予想待ち時間"),
        eta_almost_there: s("まもなくです"),
        eta_minutes: s("約{minutes}分"),
        eta_hours: s("約{hours}時間{minutes}分"),
        eta_unknown: s("不明：ここ数分間、誰も入場していません"),
        auto_update: s(
            "このページは自動で更新されます。開いたままにしてください。順番が来ると、\
             自動で入場できます。",
        ),
        error: s("待機室に接続できません。{seconds}秒後に再試行します。"),
        letting_in: s("順番が来ました。ご案内しています\u{2026}"),
        leave_button: s("列から抜ける"),
        left_title: s("列から抜けました"),
        left_message: s("順番が取り消されたため、列はあなたを除いて進みます。"),
        back_to_site: s("サイトに戻る"),
        gone_title: s("すでに列に並んでいません"),
        gone_message: s(
            "順番が取り消されたか（別のタブで操作された可能性があります）、有効期限が切れました。",
        ),
        rejoin: s("もう一度列に並ぶ"),
        eta_estimating: s("計算中\u{2026}"),
        eta_range: s("{low}～{high}分"),
        eta_paused: s("一時停止中：まもなく列が再び進みます"),
        closed_title: s("販売期間外です"),
        closed_message: s("現在、販売は行っていません。列に並んでいた場合は、\
             このページを開いている間は順番が保たれます。ページが自動で再確認します。"),
        banned_title: s("入場できません"),
        banned_message: s("サイトの運営者によって、アクセスが終了されました。"),
        refused_title: s("ご入場いただけません"),
        refused_message: s("現在、\
             このサイトはお使いのネットワークまたはソフトウェアからのアクセスを受け付けていません。\
             通常のブラウザをお使いの場合は、\
             別のネットワーク（VPNやホスティング事業者のものを除く）からもう一度お試しください。"),
        full_title: s("列がいっぱいです"),
        full_message: s(
            "待っている人が多く、列がいっぱいです。このページはまもなく自動で再試行します。",
        ),
        unavailable_title: s("しばらくしてからもう一度お試しください"),
        unavailable_message: s("現在、待機室に接続できません。このページは自動で再試行します。"),
        busy_title: s("ただいま大変混み合っています"),
        busy_message: s("待機室が大変混み合っています。このページはまもなく再試行します。"),
        limited_title: s("リクエストが多すぎます"),
        limited_message: s(
            "お使いの接続から、待機室の上限を超えるリクエストが送信されました。\
             このページはまもなく自動で再試行します。",
        ),
        challenge_title: s("ブラウザを確認しています"),
        challenge_message: s(
            "列に並ぶ前に、ボットによる順番の確保を防ぐため、ブラウザが小さなパズルを解きます。\
             数秒かかりますので、このページを開いたままにしてください。",
        ),
        challenge_unsupported: s(
            "お使いのブラウザでは、ここでこの確認を行えません。JavaScriptと安全な（https）\
             接続が必要です。",
        ),
        try_again: s("今すぐ再試行"),
        thousands_separator: s(","),
        grouping_from: 1_000,
        digits: s("0123456789"),
        dir: s("ltr"),
        scheduled_title: s("まもなく販売開始です"),
        scheduled_message: s("登録済みです。開始時に、\
             それまでに登録した全員にランダムな順番で列の位置が割り当てられるため、\
             早く来ても有利にはならず、再読み込みしても何も変わりません。\
             このページを開いたままにしてください。自動で列に並びます。"),
        scheduled_countdown: s("あと{time}で開始"),
    }
}
