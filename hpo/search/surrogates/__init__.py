"""The models the searchers consult, apart from the schedules that consult them: the
multi-fidelity TPE (`tpe`), the paper's KDE (`kde`, `kde_sampler`), the Gaussian processes
(`config_gp`, `bohb_gp`), learning-curve extrapolation (`learning_curves`), the check that a
low budget ranks as the top one does (`rung_agreement`), redraws beside failed configs
(`failure_neighbours`), and which model a name means (`model_choice`). numpy and
scikit-learn only."""
