//! `repocast demo` (placeholder until the harness lands).

pub fn run() -> std::process::ExitCode {
    println!("repocast demo: not built yet");
    std::process::ExitCode::SUCCESS
}
