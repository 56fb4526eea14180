"""The tray icon: its picture (queue badge, state colour), its menu and view of the service's
status, and the pystray backend it runs on; it talks to the service in-process."""
