fn main() -> std::process::ExitCode {
    readout::cli::main()
}
